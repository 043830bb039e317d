"""Read a .pte file: its methods, delegates, payload sizes and the ops left on the CPU."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from lowerkit.cli import _upstream
from lowerkit.cli.errors import UsageError


@dataclass(frozen=True)
class Delegate:
    """One delegated subgraph of a method."""

    backend_id: str
    payload_bytes: int
    compile_specs: dict[str, str]
    #: Core ML only, with `weights=True`: constexpr weight formats and decoded weights.
    weights: dict[str, Any] | None = None


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
        return asdict(self)


def payloads(data: bytes) -> list[tuple[str, bytes]]:
    """(backend id, processed payload bytes) for every delegate in a .pte."""
    program = _read(data, "<bytes>").program
    found = []
    for plan in program.execution_plan:
        for delegate in plan.delegates:
            found.append((delegate.id, _payload(program, delegate)))
    return found


def summarize(path: Path, *, weights: bool = False) -> PteSummary:
    """Summarize the .pte at `path` (with Core ML weight formats if `weights`); UsageError if not a .pte."""
    if not path.is_file():
        raise UsageError(f"'{path}' does not exist")
    data = path.read_bytes()
    program = _read(data, str(path)).program
    methods = []
    for plan in program.execution_plan:
        delegates = [
            Delegate(
                backend_id=d.id,
                payload_bytes=len(_payload(program, d)),
                compile_specs={s.key: _spec_text(s.value) for s in d.compile_specs},
                weights=_coreml_weights(_payload(program, d)) if weights and d.id == "CoreMLBackend" else None,
            )
            for d in plan.delegates
        ]
        cpu_ops = sorted({f"{op.name}.{op.overload}" if op.overload else op.name for op in plan.operators})
        methods.append(Method(plan.name, len(plan.inputs), len(plan.outputs), delegates, cpu_ops))
    return PteSummary(str(path), len(data), methods)


def _read(data: bytes, where: str) -> Any:
    if len(data) < 8 or data[4:6] != b"ET":
        raise UsageError(f"'{where}' is not an ExecuTorch .pte file (no 'ET' file identifier)")
    try:
        return _upstream.deserialize_pte(data)
    except Exception as error:
        raise UsageError(f"'{where}' is a damaged .pte file ({type(error).__name__})") from None


def _payload(program: Any, delegate: Any) -> bytes:
    reference = delegate.processed
    if int(reference.location) == 0:  # DataLocation.INLINE
        return bytes(program.backend_delegate_data[reference.index].data)
    return bytes(program.segments[reference.index].data) if hasattr(program.segments[reference.index], "data") else b""


def _spec_text(value: bytes) -> str:
    try:
        return bytes(value).decode("utf-8")
    except UnicodeDecodeError:
        return bytes(value).hex()


def _coreml_weights(payload: bytes) -> dict[str, Any]:
    from lowerkit.cli.coreml_payload import weight_summary

    return weight_summary(payload)
