"""The NPU report: what Vela says the Ethos-U will do with a lowered program, read from Vela's own output.

Vela writes its performance estimates to files next to the command stream: a summary CSV
(``<name>_summary_<system config>.csv``: cycles, memory used per area, MACs, weights) and,
with ``--verbose-performance``, a per-layer CSV (``<name>_per-layer.csv``: each layer's TOSA
op, the NPU op it became, NPU or CPU, cycles, MACs, staging memory). ExecuTorch's backend
runs Vela in a temporary folder it deletes, so ``npu_reports`` runs Vela again on the same
TOSA flatbuffer with the same flags (plus reporting flags only), checks that the command
stream and weights it produces are the very bytes in the ``.pte`` (the same compile), and
reads those files. Nothing here recomputes a cycle or a byte count.
"""

from __future__ import annotations

import contextlib
import csv
import io
import tempfile
from collections import Counter
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from lowerkit.arm_passes.errors import ArmLoweringError

__all__ = ["NpuLayer", "NpuReport", "npu_reports", "run_vela"]

#: Flags added to the lowering's own Vela flags: they only make Vela report more.
REPORT_FLAGS = ("--verbose-performance", "--verbose-cycle-estimate", "--verbose-weights", "--show-cpu-operations")
_KIB = 1024


@dataclass(frozen=True)
class NpuLayer:
    """One row of Vela's per-layer performance table."""

    tosa_op: str
    vela_op: str
    #: "NPU" or "CPU", as Vela placed it.
    runs_on: str
    name: str
    op_cycles: int
    npu_cycles: int
    mac_count: int
    mac_utilisation_percent: float
    staging_bytes: int


@dataclass(frozen=True)
class NpuReport:
    """Vela's estimates for one delegated partition, as Vela wrote them."""

    vela_version: str
    accelerator: str
    system_config: str
    memory_mode: str
    core_clock_hz: float
    #: Cycles: "npu", "sram_access", "dram_access", "on_chip_flash_access", "off_chip_flash_access", "total".
    cycles: dict[str, int]
    inference_seconds: float
    macs: int
    #: Peak bytes used per memory area ("sram", "dram", "on_chip_flash", "off_chip_flash").
    memory_used_bytes: dict[str, int]
    #: Where weights and feature maps live ("Off-chip Flash", "SRAM", ...).
    weights_area: str
    feature_map_area: str
    #: The arena cache size Vela planned for (the memory mode's, or Vela's default).
    arena_cache_bytes: int
    original_weight_bytes: int
    encoded_weight_bytes: int
    #: The scratch buffer the runtime must provide for this command stream (Vela's scratch_shape).
    scratch_bytes: int
    layers: tuple[NpuLayer, ...]
    #: Vela's printed summary for the compile.
    summary_text: str = field(default="", repr=False)

    @property
    def npu_cycles(self) -> int:
        """Vela's NPU cycles estimate."""
        return self.cycles["npu"]

    @property
    def total_cycles(self) -> int:
        """Vela's total cycles estimate (NPU and memory access overlapped as Vela models it)."""
        return self.cycles["total"]

    @property
    def sram_bytes(self) -> int:
        """Peak SRAM use."""
        return self.memory_used_bytes.get("sram", 0)

    @property
    def flash_bytes(self) -> int:
        """Peak on- and off-chip flash use (read-only data: weights, constants)."""
        return self.memory_used_bytes.get("on_chip_flash", 0) + self.memory_used_bytes.get("off_chip_flash", 0)

    def op_mapping(self) -> dict[str, int]:
        """``"TOSA op -> Vela op (NPU|CPU)"`` with how many layers took that path."""
        counts = Counter(f"{layer.tosa_op} -> {layer.vela_op} ({layer.runs_on})" for layer in self.layers)
        return dict(sorted(counts.items()))

    def cpu_layers(self) -> tuple[NpuLayer, ...]:
        """Layers Vela left to the CPU."""
        return tuple(layer for layer in self.layers if layer.runs_on != "NPU")

    def peak_staging_layer(self) -> NpuLayer | None:
        """The layer with the largest staging (SRAM working set), or None."""
        return max(self.layers, key=lambda layer: layer.staging_bytes, default=None)

    def to_json(self) -> dict[str, Any]:
        """A JSON-ready dict (without the printed summary)."""
        data = asdict(self)
        data.pop("summary_text")
        data["op_mapping"] = self.op_mapping()
        return data


def run_vela(tosa_flatbuffer: bytes, flags: list[str], folder: Path) -> str:
    """Run Vela's command line in-process on a TOSA flatbuffer, writing into `folder`; returns what it printed."""
    from ethosu.vela import vela

    network = folder / "out.tosa"
    network.write_bytes(tosa_flatbuffer)
    argv = [*flags, *REPORT_FLAGS, f"--output-dir={folder / 'output'}", str(network)]
    printed = io.StringIO()
    with contextlib.redirect_stdout(printed):
        status = vela.main(argv)
    if status != 0:
        raise ArmLoweringError(f"Vela failed on the report run: {printed.getvalue().strip().splitlines()[-1:]}")
    return printed.getvalue()


def _rows(path: Path) -> list[dict[str, str]]:
    with path.open(newline="") as file:
        return list(csv.DictReader(file))


def _read_report(folder: Path, printed: str, payload: bytes) -> NpuReport:
    import numpy as np
    from ethosu.vela import __version__ as vela_version

    output = folder / "output"
    summaries = sorted(output.glob("out_summary_*.csv"))
    if len(summaries) != 1:
        raise ArmLoweringError(f"Vela wrote {len(summaries)} summary files in {output}; expected one")
    summary = _rows(summaries[0])[0]
    per_layer = output / "out_per-layer.csv"
    layers = tuple(
        NpuLayer(
            tosa_op=row["Original Operator"],
            vela_op=row["NNG Operator"],
            runs_on=row["Target"],
            name=row["Name"],
            op_cycles=int(float(row["Op Cycles"])),
            npu_cycles=int(float(row["NPU"])),
            mac_count=int(float(row["MAC Count"])),
            mac_utilisation_percent=float(row["Util% (MAC)"]),
            staging_bytes=int(float(row["Staging Usage"])),
        )
        for row in (_rows(per_layer) if per_layer.is_file() else [])
    )
    with np.load(output / "out_vela.npz", allow_pickle=False) as data:
        for block in ("cmd_data", "weight_data"):
            if data[block].tobytes() not in payload:
                raise ArmLoweringError(
                    f"Vela's report run produced a different {block} than the .pte holds; "
                    "the report would describe another compile (is Vela deterministic here?)"
                )
        scratch = int(data["scratch_shape"][0])
    areas = ("sram", "dram", "on_chip_flash", "off_chip_flash")
    kinds = ("npu", "sram_access", "dram_access", "on_chip_flash_access", "off_chip_flash_access", "total")
    return NpuReport(
        vela_version=str(vela_version),
        accelerator=summary["accelerator_configuration"],
        system_config=summary["system_config"],
        memory_mode=summary["memory_mode"],
        core_clock_hz=float(summary["core_clock"]),
        cycles={kind: int(float(summary[f"cycles_{kind}"])) for kind in kinds},
        inference_seconds=float(summary["inference_time"]),
        macs=int(float(summary["nn_macs"])),
        # Vela writes memory used in KiB (bytes / 1024), exact in binary floating point.
        memory_used_bytes={area: round(float(summary[f"{area}_memory_used"]) * _KIB) for area in areas},
        weights_area=summary["weights_storage_area"],
        feature_map_area=summary["feature_map_storage_area"],
        arena_cache_bytes=round(float(summary["arena_cache_size"]) * _KIB),
        original_weight_bytes=int(float(summary["total_original_weights"])),
        encoded_weight_bytes=int(float(summary["total_npu_encoded_weights"])),
        scratch_bytes=scratch,
        layers=layers,
        summary_text=printed,
    )


def npu_reports(lowering: Any) -> tuple[NpuReport, ...]:
    """Vela's report for each Ethos-U partition of an ``ArmLowering`` (same TOSA, same flags)."""
    if not lowering.vela_binaries:
        raise ArmLoweringError(f"the NPU report needs an Ethos-U target; {lowering.target} has no Vela output")
    flags = [f for f in lowering.compile_spec.compiler_flags if not f.startswith("--output-dir=")]
    reports = []
    for tosa, payload in zip(lowering.tosa_flatbuffers, lowering.vela_binaries, strict=True):
        with tempfile.TemporaryDirectory(prefix="lowerkit-vela-") as tmp:
            folder = Path(tmp)
            printed = run_vela(tosa, flags, folder)
            reports.append(_read_report(folder, printed, payload))
    return tuple(reports)
