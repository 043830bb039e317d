"""The exceptions pass-infra raises."""

from __future__ import annotations

__all__ = ["PassEquivalenceError", "PassInfraError"]


class PassInfraError(ValueError):
    """A pass-infra API was used wrongly; the message says what to change."""


class PassEquivalenceError(AssertionError):
    """Verify mode: a pass's fast path produced a graph different from its reference run."""

    def __init__(self, pass_name: str, node: str, detail: str) -> None:
        self.pass_name = pass_name
        self.node = node
        self.detail = detail
        super().__init__(
            f"pass {pass_name!r}: the fast path differs from the stock ExportPass replay at "
            f"node {node!r}: {detail}. The pass probably transforms an op missing from its "
            f"targeted_ops (add it), or overrides call() and is not fast-copy safe "
            f"(set fast_copy_safe = False)."
        )
