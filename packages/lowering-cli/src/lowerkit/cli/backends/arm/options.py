"""The Arm options: their flags, help, which targets take them, and the settings they fill.

Adding an Arm flag is one `TargetOption` in `OPTIONS` (and, if it changes the lowering, a field
of `ArmSettings` its `field` names): `lower --help`, the checks, FLEET.toml and the cache key
follow.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from lowerkit.cli.backend import TargetOption
from lowerkit.cli.backends.arm.targets import BY_NAME, TARGET_TABLE, is_arm, is_ethos_u, kind
from lowerkit.cli.errors import UsageError
from lowerkit.cli.options import OUTPUT, Target


@dataclass(frozen=True)
class ArmSettings:
    """The settings of an Arm lowering (`LowerOptions.settings`); each field is in the cache key."""

    #: Ethos-U: Vela system config and memory mode (None: ExecuTorch's defaults for the target)
    #: and Vela config file (None: Vela's Arm/vela.ini).
    system_config: str | None = None
    memory_mode: str | None = None
    vela_config: Path | None = None
    #: Quantize activations to int16, weights to int8 (Ethos-U; implied by tosa-int16).
    a16w8: bool = False
    #: Also write a bundled program (.bpte: inputs and reference outputs) / an ETRecord here.
    bundle_path: Path | None = field(default=None, metadata=OUTPUT)
    etrecord_path: Path | None = field(default=None, metadata=OUTPUT)
    #: Ethos-U: fail, writing nothing, when Vela's SRAM / flash use passes these (bytes).
    sram_budget: int | None = None
    flash_budget: int | None = None


def _ignored_by_vgf(option: str) -> Any:
    """ExecuTorch's aot_arm_compiler takes this Vela setting for `vgf` and ignores it: a warning there."""

    def ignored(target: Target) -> str | None:
        if kind(target) != "vgf":
            return None
        return f"{option} is a Vela (Ethos-U) setting; '{target.name}' ignores it, as ExecuTorch's VGF lowering does"

    return ignored


def _a16w8_hint(target: Target) -> str:
    row = BY_NAME.get(target.name)
    if row is not None and row.a16w8:
        return f"; {row.name} is a16w8 already"
    if row is not None and row.kind == "vgf":
        return "; ExecuTorch's VGF lowering uses TOSA-1.0+INT, which has no int16 (use -t tosa-int16)"
    return f"; for TOSA use -t {next(r.name for r in TARGET_TABLE if r.a16w8)}"


def _bundle(target: Target, path: Path) -> Path:
    if path.suffix != ".bpte":
        raise UsageError(f"--bundle writes a bundled program; name it '{path.with_suffix('.bpte')}'")
    return path


def _vela_config(target: Target, path: Path) -> Path:
    if not path.is_file():
        raise UsageError(f"Vela config file '{path}' does not exist; give the path of a vela.ini")
    return path


def _size(flag: str) -> Any:
    def convert(target: Target, text: str | int) -> int:
        from lowerkit.cli.sizes import parse_size

        return parse_size(str(text), flag)

    return convert


_ETHOS_U = "Ethos-U targets (ethos-u55-128, ...)"


def _vela_option(flag: str, field: str, help: str, **declared: Any) -> TargetOption:
    return TargetOption(
        flag, _ETHOS_U, is_ethos_u, help=help, field=field, fleet=True, ignored=_ignored_by_vgf(flag), **declared
    )


#: Every option only some Arm targets take, in `lower --help` order.
OPTIONS: tuple[TargetOption, ...] = (
    TargetOption("--tosa-dir", "Arm targets", is_arm, kind="path", help="Also write the TOSA flatbuffers into this folder."),
    _vela_option(
        "--system-config", "system_config", "Ethos-U: Vela system config (default: ExecuTorch's for the target)."
    ),
    _vela_option("--memory-mode", "memory_mode", "Ethos-U: Vela memory mode (default: ExecuTorch's for the target)."),
    _vela_option(
        "--vela-config", "vela_config", "Ethos-U: a Vela .ini (default: Vela's Arm/vela.ini).",
        kind="path", convert=_vela_config,
    ),
    TargetOption(
        "--a16w8", "Ethos-U targets", is_ethos_u, hint=_a16w8_hint, kind="flag", field="a16w8", fleet=True,
        help="Ethos-U: int16 activations, int8 weights (tosa-int16 always is).",
    ),
    TargetOption(
        "--bundle", "Arm targets", is_arm, kind="path", field="bundle_path", convert=_bundle, writes=True,
        help="Arm: also write a bundled program (.bpte) with reference outputs.",
    ),
    TargetOption(
        "--etrecord", "Arm targets", is_arm, kind="path", field="etrecord_path", writes=True,
        help="Arm: also write an ETRecord for ExecuTorch's Inspector.",
    ),
    TargetOption(
        "--sram-budget", _ETHOS_U, is_ethos_u, field="sram_budget", convert=_size("--sram-budget"), fleet=True,
        help="Ethos-U: fail, writing nothing, if Vela's SRAM use passes this (e.g. 512KiB).",
    ),
    TargetOption(
        "--flash-budget", _ETHOS_U, is_ethos_u, field="flash_budget", convert=_size("--flash-budget"), fleet=True,
        help="Ethos-U: fail, writing nothing, if Vela's flash use passes this (e.g. 2MiB).",
    ),
    TargetOption(
        "--bisect", "Arm targets", is_arm, kind="flag", command="debug",
        refusal_text="{flag} bisects the Arm pass pipeline; '{target}' is not an Arm target",
        help="Arm INT: name the first pass after which the lowered graph's outputs leave the fake-quant program's "
        "(run anyway when the TOSA graph and the fake-quant program disagree beyond --threshold).",
    ),
)
