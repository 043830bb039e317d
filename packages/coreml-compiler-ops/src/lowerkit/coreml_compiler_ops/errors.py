"""The exception this package raises for inputs Core ML cannot express."""

from __future__ import annotations

from collections.abc import Iterable


class UnsupportedOpError(ValueError):
    """An op (or an op's parameters) that lowerkit cannot express in Core ML MIL or decode."""

    def __init__(self, op: str, problem: str, supported: Iterable[str], hint: str = "") -> None:
        self.op = op
        self.problem = problem
        self.supported = tuple(supported)
        self.hint = hint
        message = f"{op}: {problem}. Supported: {'; '.join(self.supported)}."
        if hint:
            message += f" {hint}"
        super().__init__(message)
