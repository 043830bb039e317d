"""How `inspect` and `compare` show Arm's outputs: an Ethos-U delegate's Vela payload, a report's NPU section.

Standard library only (`lowerkit inspect` starts without torch).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from lowerkit.cli.backend import PayloadDecoder


def _decode(payload: bytes, compile_specs: Mapping[str, str], deep: bool) -> dict[str, Any] | None:
    from lowerkit.cli.backends.arm.vela_stream import summary

    try:
        return summary(payload, dict(compile_specs))
    except (ValueError, KeyError):
        return None


def _lines(compile_specs: Mapping[str, str], vela: dict[str, Any] | None) -> list[str]:
    if vela is None:
        return []
    scratch = f"{vela['scratch_bytes']:,}" if vela["scratch_bytes"] is not None else "?"
    return [
        f"      Vela: {vela.get('accelerator-config', '?')}, {vela.get('system-config', '?')}, "
        f"{vela.get('memory-mode', '?')}; command stream {vela['command_stream_bytes']:,} bytes, "
        f"weights {vela['weight_bytes']:,} bytes, scratch {scratch} bytes"
    ]


def _figures(vela: dict[str, Any]) -> dict[str, Any]:
    return {
        "Vela command stream bytes": vela["command_stream_bytes"],
        "Vela weight bytes": vela["weight_bytes"],
        "scratch bytes (from .pte)": vela["scratch_bytes"],
    }


#: An Ethos-U delegate: Vela's command stream, weight and scratch sizes and its settings.
VELA = PayloadDecoder("EthosUBackend", "vela", _decode, _lines, _figures)


def report_lines(report: Mapping[str, Any]) -> list[str]:
    """The NPU section of a report, as `inspect` prints it."""
    if not report.get("npu"):
        return []
    from lowerkit.cli.backends.arm.npu import render

    return list(render(report["npu"]))


def report_figures(report: Mapping[str, Any]) -> dict[str, Any]:
    """`compare`'s rows for the NPU section of a report: Vela's cycles, memory and layers."""
    npu = report.get("npu")
    if not npu:
        return {}
    totals = npu["totals"]
    return {
        "Vela version": npu["vela_version"],
        "system config / memory mode": f"{npu['system_config']} / {npu['memory_mode']}",
        "NPU cycles": totals["npu_cycles"],
        "total cycles": totals["total_cycles"],
        "SRAM bytes": totals["sram_bytes"],
        "flash bytes": totals["flash_bytes"],
        "scratch bytes": totals["scratch_bytes"],
        "NPU layers": npu["ops"]["npu_layers"],
        "Vela CPU layers": len(npu["ops"]["vela_cpu_layers"]),
    }
