"""The NPU report section of `lowerkit lower --report` / `--json`, and its text form for `lower` and `inspect`.

`npu_section` turns lowerkit.arm_passes' `NpuReport`s (Vela's own figures) into JSON; `render`
prints one, with the standard library only (so `lowerkit inspect REPORT.json` starts fast).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from typing import Any

#: Ops that only move data between layouts (NCHW <-> NHWC): TOSA's TRANSPOSE, ATen's permute.
_TRANSPOSE_WORDS = ("transpose", "permute")


def npu_section(
    reports: Sequence[Any], cpu_ops: Sequence[str], sram_limit: int | None = None, transposes: Any = None
) -> dict[str, Any]:
    """JSON-ready NPU report: per partition Vela's figures, totals, op placement and the TOSA -> Vela op mapping.

    `sram_limit`: the memory mode's SRAM size (its arena_cache_size), when the Vela config sets one.
    `transposes`: the lowering's ``LayoutTransposes`` (delegate boundary vs internal, NPU and CPU side).
    """
    partitions = [report.to_json() for report in reports]
    first = partitions[0]
    layers = [layer for part in partitions for layer in part["layers"]]
    mapping: Counter[str] = Counter()
    for part in partitions:
        mapping.update(part["op_mapping"])
    return {
        "vela_version": first["vela_version"],
        "accelerator": first["accelerator"],
        "system_config": first["system_config"],
        "memory_mode": first["memory_mode"],
        "core_clock_hz": first["core_clock_hz"],
        "totals": {
            "npu_cycles": sum(p["cycles"]["npu"] for p in partitions),
            "total_cycles": sum(p["cycles"]["total"] for p in partitions),
            "inference_seconds": sum(p["inference_seconds"] for p in partitions),
            "macs": sum(p["macs"] for p in partitions),
            "sram_bytes": sum(r.sram_bytes for r in reports),
            "flash_bytes": sum(r.flash_bytes for r in reports),
            "scratch_bytes": sum(p["scratch_bytes"] for p in partitions),
            "encoded_weight_bytes": sum(p["encoded_weight_bytes"] for p in partitions),
            "sram_limit_bytes": sram_limit,
        },
        "weights_area": first["weights_area"],
        "feature_map_area": first["feature_map_area"],
        "ops": {
            "npu_layers": sum(1 for layer in layers if layer["runs_on"] == "NPU"),
            "vela_cpu_layers": [layer["name"] for layer in layers if layer["runs_on"] != "NPU"],
            "cpu_ops_outside_delegate": list(cpu_ops),
            "layout_transposes_on_npu": [
                layer["name"] for layer in layers if any(w in layer["tosa_op"].lower() for w in _TRANSPOSE_WORDS)
            ],
            "layout_transposes_on_cpu": [op for op in cpu_ops if any(w in op.lower() for w in _TRANSPOSE_WORDS)],
            # The TOSA TRANSPOSEs (and CPU permutes) by where they sit: at the delegate's inputs /
            # outputs (the NCHW <-> NHWC price of the model's interface) or inside.
            **({"layout_transposes": {
                kind: list(getattr(transposes, kind))
                for kind in ("delegate_boundary", "delegate_internal", "cpu_boundary", "cpu_internal")
            }} if transposes is not None else {}),
        },
        "op_mapping": dict(sorted(mapping.items())),
        "partitions": partitions,
    }


def _transposes_line(ops: dict[str, Any]) -> str:
    split = ops.get("layout_transposes")
    if split is None:  # a report written before the split
        cpu = ops["layout_transposes_on_cpu"]
        return (
            f"  layout transposes: {len(ops['layout_transposes_on_npu'])} on the NPU, {len(cpu)} on the CPU"
            + (f" ({', '.join(cpu)})" if cpu else "")
        )
    return (
        f"  layout transposes: in the delegate {len(split['delegate_boundary'])} at its inputs/outputs, "
        f"{len(split['delegate_internal'])} inside ({len(ops['layout_transposes_on_npu'])} Vela layers); "
        f"on the CPU {len(split['cpu_boundary'])} next to the delegate, {len(split['cpu_internal'])} between CPU ops"
    )


def _kib(value: int) -> str:
    return f"{value / 1024:,.1f} KiB"


def render(section: dict[str, Any], *, layers: bool = True) -> list[str]:
    """The NPU report as text lines."""
    totals, ops = section["totals"], section["ops"]
    clock = section["core_clock_hz"]
    limit = totals.get("sram_limit_bytes")
    lines = [
        f"NPU report (Vela {section['vela_version']}: {section['accelerator']}, "
        f"{section['system_config']}, {section['memory_mode']})",
        f"  cycles: NPU {totals['npu_cycles']:,}, total {totals['total_cycles']:,} "
        f"({totals['inference_seconds'] * 1e3:.3f} ms at {clock / 1e6:,.0f} MHz), {totals['macs']:,} MACs",
        f"  memory: SRAM {_kib(totals['sram_bytes'])}"
        + (f" of the memory mode's {_kib(limit)}" if limit else " (the memory mode sets no SRAM size)")
        + f", flash {_kib(totals['flash_bytes'])}, scratch {_kib(totals['scratch_bytes'])}; "
        f"weights in {section['weights_area']}, feature maps in {section['feature_map_area']}",
        f"  ops: {ops['npu_layers']} layers on the NPU, {len(ops['vela_cpu_layers'])} left to the CPU by Vela, "
        f"CPU ops outside the delegate: {', '.join(ops['cpu_ops_outside_delegate']) or 'none'}",
        _transposes_line(ops),
        "  TOSA -> Vela: " + "; ".join(f"{path} x{count}" for path, count in section["op_mapping"].items()),
    ]
    if layers:
        lines.append(f"  {'layer':<28} {'TOSA op':<18} {'Vela op':<18} {'on':<4} {'cycles':>9} {'MACs':>10} {'util%':>6}")
        for part in section["partitions"]:
            for layer in part["layers"]:
                lines.append(
                    f"  {layer['name'][:28]:<28} {layer['tosa_op'][:18]:<18} {layer['vela_op'][:18]:<18} "
                    f"{layer['runs_on']:<4} {layer['op_cycles']:>9,} {layer['mac_count']:>10,} "
                    f"{layer['mac_utilisation_percent']:>6.1f}"
                )
    return lines
