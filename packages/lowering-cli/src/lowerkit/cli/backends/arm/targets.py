"""The Arm targets: one row each (`TARGET_TABLE`), and what a row says of a `Target`."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal

from lowerkit.cli.options import Target

#: Every Ethos-U configuration ExecuTorch 1.5.1 accepts: (NPU, MACs per cycle). Listed here, not
#: imported from lowerkit.arm_passes, so `lowerkit targets` starts without torch (a test checks
#: the two lists agree).
ETHOS_U_CONFIGS: tuple[tuple[int, int], ...] = (
    *((55, macs) for macs in (32, 64, 128, 256)),
    *((65, macs) for macs in (256, 512)),
    *((85, macs) for macs in (128, 256, 512, 1024, 2048)),
)


@dataclass(frozen=True)
class ArmTarget:
    """One Arm target: the CLI's name, lowerkit.arm_passes' name, and the kind of output."""

    name: str
    arm_name: str
    kind: Literal["tosa", "ethos-u", "vgf"]
    summary: str
    calibrates: bool = False
    #: Quantizes activations to int16 by itself (what --a16w8 asks of Ethos-U).
    a16w8: bool = False


#: Adding an Arm target is one row here (and its pipeline in lowerkit.arm_passes).
TARGET_TABLE: tuple[ArmTarget, ...] = (
    ArmTarget("tosa-int", "TOSA-1.0+INT", "tosa", "TOSA-1.0+INT flatbuffer (int8 quantized)", True),
    ArmTarget("tosa-fp", "TOSA-1.0+FP", "tosa", "TOSA-1.0+FP flatbuffer (float)"),
    ArmTarget(
        "tosa-int16", "TOSA-1.0+INT+int16", "tosa",
        "TOSA-1.0+INT+int16 flatbuffer (a16w8: int16 activations, int8 weights)", True, a16w8=True,
    ),
    *(
        ArmTarget(
            f"ethos-u{npu}-{macs}", f"ethos-u{npu}-{macs}", "ethos-u",
            f"Arm Ethos-U{npu}, {macs} MACs (int8 or --a16w8, vela-compiled)", True,
        )
        for npu, macs in ETHOS_U_CONFIGS
    ),
    # ExecuTorch's aot_arm_compiler has one `vgf` target: TOSA-1.0+INT with --quantize, +FP without.
    ArmTarget(
        "vgf-int", "vgf-int", "vgf",
        "VGF (TOSA-1.0+INT, int8 quantized, converted by Arm's ML SDK model converter)", True,
    ),
    ArmTarget("vgf-fp", "vgf-fp", "vgf", "VGF (TOSA-1.0+FP, float, converted by Arm's ML SDK model converter)"),
)
#: `Target.backend` of the Arm targets.
FAMILY = "arm"
BY_NAME = {row.name: row for row in TARGET_TABLE}

#: CLI target name -> lowerkit.arm_passes target name.
ARM_TARGET_NAMES = {row.name: row.arm_name for row in TARGET_TABLE}


def llm_overrides(target: Target) -> dict[str, Any] | None:
    """``export_llm``'s settings for `target` (8a8w where it quantizes); None: it has no TOSA int16."""
    row = BY_NAME[target.name]
    if row.kind == "tosa":
        if row.a16w8:
            return None
        if row.calibrates:
            return {"backend.tosa.enabled": True, "quantization.pt2e_quantize": "tosa_8a8w"}
        return {"backend.tosa.enabled": True, "backend.tosa.version": row.arm_name}
    if row.kind == "ethos-u":
        return {"backend.ethosu.enabled": True, "backend.ethosu.target": row.arm_name, "quantization.pt2e_quantize": "ethosu_8a8w"}
    if row.calibrates:
        return {"backend.vgf.enabled": True, "quantization.pt2e_quantize": "vgf_8a8w"}
    return {"backend.vgf.enabled": True, "backend.vgf.compile_spec": "TOSA-1.0+FP"}


def kind(target: Target) -> str | None:
    """The target's kind ("tosa", "ethos-u", "vgf"), None for a target that is not Arm's."""
    row = BY_NAME.get(target.name)
    return row.kind if row is not None else None


def is_arm(target: Target) -> bool:
    """Whether `target` is an Arm target."""
    return target.name in BY_NAME


def is_ethos_u(target: Target) -> bool:
    """Whether `target` is an Ethos-U target."""
    return kind(target) == "ethos-u"
