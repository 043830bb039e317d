"""`lowerkit compare A B`: what changed between two lowerings of one model (an ExecuTorch or Vela upgrade, a setting).

Each side is a .pte (or .bpte) or a report written by `lowerkit lower --report`; a report
brings its backend's figures (`Backend.report_figures`: Vela's cycles and memory) and the
--verify numerics, and the .pte it names when that file is still there; a delegate brings
what its backend's decoder reads (`PayloadDecoder.figures`). Standard library only.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from lowerkit.cli import inspect_files, inspect_pte, targets


@dataclass
class Side:
    """What one side of the comparison shows."""

    name: str
    values: dict[str, Any] = field(default_factory=dict)
    cpu_ops: list[str] | None = None


def _program(side: Side, data: bytes, where: str) -> None:
    summary = inspect_pte.summarize_bytes(data, where)
    side.values["pte bytes"] = len(data)
    side.values["pte sha256"] = hashlib.sha256(data).hexdigest()[:16]
    delegates = [d for m in summary.methods for d in m.delegates]
    side.values["delegates"] = ", ".join(d.backend_id for d in delegates) or "none"
    side.values["delegate payload bytes"] = sum(d.payload_bytes for d in delegates)
    for delegate in delegates:
        side.values.update(delegate.figures())
    if side.cpu_ops is None:
        side.cpu_ops = sorted({op for m in summary.methods for op in m.cpu_ops})


def load(path: Path) -> Side:
    """Read one side: a .pte / .bpte, or a report (with its .pte when present)."""
    kind = inspect_files.kind_of(path)
    side = Side(str(path))
    if kind == "report":
        data = inspect_files.report(path)
        side.values["target"] = data["target"]
        side.cpu_ops = list(data.get("cpu_ops", []))
        for backend in targets.BACKENDS.values():
            side.values.update(backend.report_figures(data))
        for key, value in (data.get("verification") or {}).items():
            if isinstance(value, int | float) and not isinstance(value, bool):
                side.values[f"verify {key}"] = value
        output = Path(data["output"])
        if output.is_file():
            _program(side, output.read_bytes(), str(output))
        else:
            side.values["pte bytes"] = data["pte_bytes"]
    elif kind == "bpte":
        _program(side, inspect_files.bundle_summary(path)["program"], str(path))
    elif kind == "pte":
        _program(side, path.read_bytes(), str(path))
    else:
        from lowerkit.cli.errors import UsageError

        raise UsageError(f"'{path}' is an ETRecord; compare .pte files or lowerkit reports")
    return side


def _change(a: Any, b: Any) -> str:
    if a == b:
        return "same"
    if isinstance(a, int | float) and isinstance(b, int | float) and not isinstance(a, bool):
        delta = b - a
        percent = f" ({delta / a:+.1%})" if a else ""
        return f"{delta:+,.4g}{percent}" if isinstance(delta, float) else f"{delta:+,}{percent}"
    return "changed"


def compare(a: Side, b: Side) -> dict[str, Any]:
    """Rows (what, A, B, change) for every figure either side has, and the CPU ops each side alone has."""
    keys = list(dict.fromkeys([*a.values, *b.values]))
    rows = [
        {"what": key, "a": a.values.get(key), "b": b.values.get(key), "change": _change(a.values.get(key), b.values.get(key))}
        for key in keys
    ]
    ops_a, ops_b = set(a.cpu_ops or []), set(b.cpu_ops or [])
    return {
        "a": a.name,
        "b": b.name,
        "rows": rows,
        "cpu_ops_only_in_a": sorted(ops_a - ops_b),
        "cpu_ops_only_in_b": sorted(ops_b - ops_a),
        "same_program": a.values.get("pte sha256") is not None and a.values.get("pte sha256") == b.values.get("pte sha256"),
    }


def _text(value: Any) -> str:
    if value is None:
        return "-"
    if isinstance(value, float):
        return f"{value:,.4g}"
    if isinstance(value, int):
        return f"{value:,}"
    return str(value)


def render(result: dict[str, Any]) -> list[str]:
    """The comparison as text lines."""
    lines = [f"A: {result['a']}", f"B: {result['b']}", f"  {'':<30} {'A':>20} {'B':>20}  change"]
    for row in result["rows"]:
        lines.append(f"  {row['what']:<30} {_text(row['a']):>20} {_text(row['b']):>20}  {row['change']}")
    lines.append(f"  CPU ops only in A: {', '.join(result['cpu_ops_only_in_a']) or 'none'}")
    lines.append(f"  CPU ops only in B: {', '.join(result['cpu_ops_only_in_b']) or 'none'}")
    lines.append("  same program bytes" if result["same_program"] else "  the programs differ")
    return lines
