"""Read a .pte file: its methods, delegates, payload sizes and the ops left on the CPU."""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from lowerkit.cli.errors import UsageError
from lowerkit.cli.pte_file import PlanEntry, read_plans


@dataclass(frozen=True)
class Delegate:
    """One delegated subgraph of a method."""

    backend_id: str
    payload_bytes: int
    compile_specs: dict[str, str]
    #: Core ML only, with `weights=True`: constexpr weight formats and decoded weights.
    weights: dict[str, Any] | None = None
    #: Ethos-U only: Vela's command stream, weight and scratch sizes and its settings.
    vela: dict[str, Any] | None = None


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
    return [(d.backend_id, d.payload) for plan in _read(data, "<bytes>") for d in plan.delegates]


def summarize(path: Path, *, weights: bool = False) -> PteSummary:
    """Summarize the .pte at `path` (with Core ML weight formats if `weights`); UsageError if not a .pte.

    Reads the file with the standard library; only Core ML weight formats import coremltools.
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
            delegates.append(
                Delegate(
                    backend_id=d.backend_id,
                    payload_bytes=len(d.payload),
                    compile_specs=specs,
                    weights=_coreml_weights(d.payload) if weights and d.backend_id == "CoreMLBackend" else None,
                    vela=_vela(d.payload, specs) if d.backend_id == "EthosUBackend" else None,
                )
            )
        cpu_ops = sorted({f"{name}.{overload}" if overload else name for name, overload in plan.operators})
        methods.append(Method(plan.name, plan.inputs, plan.outputs, delegates, cpu_ops))
    return PteSummary(where, len(data), methods)


def _vela(payload: bytes, specs: dict[str, str]) -> dict[str, Any] | None:
    from lowerkit.cli.backends.arm.vela_stream import summary

    try:
        return summary(payload, specs)
    except (ValueError, KeyError):
        return None


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


def enumerated_shapes(compile_specs: dict[str, str]) -> dict[str, list[list[int]]]:
    """A Core ML delegate's enumerated input shapes, from ExecuTorch's ``enumerated_shapes`` spec."""
    text = compile_specs.get("enumerated_shapes")
    if not text:
        return {}
    shapes: dict[str, list[list[int]]] = {}
    try:
        for _symbolic, (enumerations, names) in json.loads(text):
            for name in names:
                shapes[str(name)] = [[int(d) for d in shape] for shape in enumerations]
    except (ValueError, TypeError):
        return {"?": []}
    return shapes


def _coreml_weights(payload: bytes) -> dict[str, Any]:
    from lowerkit.cli.backends.coreml.payload import weight_summary

    return weight_summary(payload)
