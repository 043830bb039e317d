"""The NPU report is Vela's: its cycles and memory equal what Vela prints for the same compile.

For each Ethos-U family the lowering's TOSA flatbuffer is compiled here by Vela's command line
with the lowering's own flags (as ExecuTorch's backend runs it) plus --verbose-cycle-estimate,
and the figures Vela prints are compared with `npu_reports` (which reads Vela's CSV files).
"""

from __future__ import annotations

import contextlib
import io
import re
import struct
import tempfile
from pathlib import Path

import pytest

from arm_targets.conftest import (
    BOARD_MEMORY_MODE,
    BOARD_SYSTEM_CONFIG,
    board_ini,
    lowerkit_lowering,
)
from lowerkit.arm_passes.npu_report import npu_reports

#: The Ethos-U lowerings of test_sameness.py: U55 int8, U65 on the user's Vela config, U85 a16w8.
CASES = {
    "ethos-u55-64": lambda: lowerkit_lowering("ethos-u55-64"),
    "ethos-u65-512-board": lambda: lowerkit_lowering(
        "ethos-u65-512", vela_config=board_ini(), system_config=BOARD_SYSTEM_CONFIG, memory_mode=BOARD_MEMORY_MODE
    ),
    "ethos-u85-1024-a16w8": lambda: lowerkit_lowering("ethos-u85-1024", True),
}


def _vela_printed_summary(tosa: bytes, flags: list[str]) -> str:
    from ethosu.vela import vela

    with tempfile.TemporaryDirectory() as tmp:
        network = Path(tmp) / "net.tosa"
        network.write_bytes(tosa)
        printed = io.StringIO()
        with contextlib.redirect_stdout(printed):
            assert vela.main([*flags, "--verbose-cycle-estimate", f"--output-dir={tmp}/out", str(network)]) == 0
    return printed.getvalue()


def _number(text: str, label: str, unit: str) -> float:
    match = re.search(rf"^{re.escape(label)}\s+([\d.]+) {re.escape(unit)}", text, re.MULTILINE)
    assert match, f"Vela printed no '{label}' line"
    return float(match.group(1))


@pytest.mark.parametrize("case", list(CASES))
def test_cycles_and_memory_match_velas_printed_summary(case: str) -> None:
    lowering = CASES[case]()
    target = lowering.target
    (report,) = npu_reports(lowering)
    printed = _vela_printed_summary(lowering.tosa_flatbuffers[0], list(lowering.compile_spec.compiler_flags))
    assert report.npu_cycles == _number(printed, "NPU cycles", "cycles/batch")
    assert report.total_cycles == _number(printed, "Total cycles", "cycles/batch")
    assert report.macs == _number(printed, "Neural network macs", "MACs/batch")
    assert round(report.sram_bytes / 1024, 2) == _number(printed, "Total SRAM used", "KiB")
    for area, label in (("on_chip_flash", "Total On-chip Flash used"), ("off_chip_flash", "Total Off-chip Flash used")):
        if report.memory_used_bytes[area]:
            assert round(report.memory_used_bytes[area] / 1024, 2) == _number(printed, label, "KiB")
        else:
            assert label not in printed
    assert report.accelerator.lower().replace("_", "-") == target
    assert report.npu_cycles > 0 and report.layers
    assert sum(layer.mac_count for layer in report.layers) == report.macs


def test_settings_reach_vela() -> None:
    """Vela's own summary names the user's system config and memory mode, and its SRAM size."""
    (report,) = npu_reports(CASES["ethos-u65-512-board"]())
    assert (report.system_config, report.memory_mode) == (BOARD_SYSTEM_CONFIG, BOARD_MEMORY_MODE)
    assert report.arena_cache_bytes == 128 * 1024


def test_scratch_is_the_one_the_pte_carries() -> None:
    lowering = lowerkit_lowering("ethos-u55-64")
    (report,) = npu_reports(lowering)
    from lowerkit.cli.backends.arm.vela_stream import blocks

    (scratch,) = struct.unpack("<I", blocks(lowering.vela_binaries[0])["scratch_size"])
    assert report.scratch_bytes == scratch > 0


def test_op_mapping_covers_every_layer() -> None:
    (report,) = npu_reports(lowerkit_lowering("ethos-u55-64"))
    mapping = report.op_mapping()
    assert sum(mapping.values()) == len(report.layers)
    assert "DepthwiseConv2D -> DepthwiseConv2D (NPU)" in mapping and not report.cpu_layers()


def test_a_report_of_another_compile_is_refused() -> None:
    import dataclasses

    from lowerkit.arm_passes import ArmLoweringError

    u55 = lowerkit_lowering("ethos-u55-64")
    other = dataclasses.replace(u55, vela_binaries=lowerkit_lowering("ethos-u85-1024", True).vela_binaries)
    with pytest.raises(ArmLoweringError, match="different cmd_data"):
        npu_reports(other)
