"""Read a .pte file: its methods, delegates, payload sizes and the ops left on the CPU.

Each delegate's payload is read by its backend's `PayloadDecoder` (`targets.DECODERS`).
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from lowerkit.cli import targets
from lowerkit.cli.errors import UsageError
from lowerkit.cli.pte_file import PlanEntry, read_plans


@dataclass(frozen=True)
class Delegate:
    """One delegated subgraph of a method."""

    backend_id: str
    payload_bytes: int
    compile_specs: dict[str, str]
    #: What its backend's `PayloadDecoder` read from the payload (None: nothing, or no decoder).
    decoded: dict[str, Any] | None = None

    def to_json(self) -> dict[str, Any]:
        """A JSON-ready dict: every decoder's key (null but for this delegate's own)."""
        own = targets.DECODERS.get(self.backend_id)
        return {
            "backend_id": self.backend_id,
            "payload_bytes": self.payload_bytes,
            "compile_specs": self.compile_specs,
            **{d.key: self.decoded if d is own else None for d in targets.DECODERS.values()},
        }

    def figures(self) -> dict[str, Any]:
        """`compare`'s rows for what its decoder read."""
        decoder = targets.DECODERS.get(self.backend_id)
        return decoder.figures(self.decoded) if decoder is not None and self.decoded is not None else {}


@dataclass(frozen=True)
class Method:
    """One method (execution plan) of the program."""

    name: str
    inputs: int
    outputs: int
    delegates: list[Delegate]
    cpu_ops: list[str]


@dataclass(frozen=True)
class PteSummary:
    """What `lowerkit inspect` prints."""

    path: str
    size_bytes: int
    methods: list[Method]
    extra: dict[str, Any] = field(default_factory=dict)

    def to_json(self) -> dict[str, Any]:
        """A JSON-ready dict."""
        data = asdict(self)
        for method, summary in zip(data["methods"], self.methods, strict=True):
            method["delegates"] = [delegate.to_json() for delegate in summary.delegates]
        return data


def payloads(data: bytes) -> list[tuple[str, bytes]]:
    """(backend id, processed payload bytes) for every delegate in a .pte."""
    return [(d.backend_id, d.payload) for plan in _read(data, "<bytes>") for d in plan.delegates]


def summarize(path: Path, *, weights: bool = False) -> PteSummary:
    """Summarize the .pte at `path` (with the costly payload decoding, e.g. weight formats, if
    `weights`); UsageError if not a .pte.

    Reads the file with the standard library; only the costly decoding may import a backend's library.
    """
    if not path.is_file():
        raise UsageError(f"'{path}' does not exist")
    return summarize_bytes(path.read_bytes(), str(path), weights=weights)


def summarize_bytes(data: bytes, where: str, *, weights: bool = False) -> PteSummary:
    """Summarize .pte bytes (`where` names them in errors and in the summary)."""
    methods = []
    for plan in _read(data, where):
        delegates = []
        for d in plan.delegates:
            specs = {key: _spec_text(value) for key, value in d.compile_specs}
            decoder = targets.DECODERS.get(d.backend_id)
            decoded = decoder.decode(d.payload, specs, weights) if decoder is not None else None
            delegates.append(Delegate(d.backend_id, len(d.payload), specs, decoded))
        cpu_ops = sorted({f"{name}.{overload}" if overload else name for name, overload in plan.operators})
        methods.append(Method(plan.name, plan.inputs, plan.outputs, delegates, cpu_ops))
    return PteSummary(where, len(data), methods)


def _read(data: bytes, where: str) -> list[PlanEntry]:
    if len(data) < 8 or data[4:6] != b"ET":
        raise UsageError(f"'{where}' is not an ExecuTorch .pte file (no 'ET' file identifier)")
    try:
        return read_plans(data)
    except Exception as error:
        raise UsageError(f"'{where}' is a damaged .pte file ({type(error).__name__})") from None


def _spec_text(value: bytes) -> str:
    try:
        return bytes(value).decode("utf-8")
    except UnicodeDecodeError:
        return bytes(value).hex()


def delegate_lines(delegate: Delegate) -> list[str]:
    """`inspect`'s lines for what its backend's decoder read from a delegate."""
    decoder = targets.DECODERS.get(delegate.backend_id)
    return decoder.lines(delegate.compile_specs, delegate.decoded) if decoder is not None else []
