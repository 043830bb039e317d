"""The lowering targets the CLI knows: a name, a backend family and what it does."""

from __future__ import annotations

from dataclasses import dataclass

from lowerkit.cli.errors import UsageError
from lowerkit.pass_infra.suggest import did_you_mean


@dataclass(frozen=True)
class Target:
    """One `-t/--target` value."""

    name: str
    backend: str  # "coreml" or "arm"
    summary: str
    #: Whether the target quantizes with calibration data.
    calibrates: bool = False


#: Every Ethos-U configuration ExecuTorch 1.5.1 accepts: (NPU, MACs per cycle). Listed here, not
#: imported from lowerkit.arm_passes, so `lowerkit targets` starts without torch (a test checks
#: the two lists agree).
ETHOS_U_CONFIGS: tuple[tuple[int, int], ...] = (
    *((55, macs) for macs in (32, 64, 128, 256)),
    *((65, macs) for macs in (256, 512)),
    *((85, macs) for macs in (128, 256, 512, 1024, 2048)),
)

TARGETS: dict[str, Target] = {
    t.name: t
    for t in (
        Target("coreml", "coreml", "Core ML, float16 compute"),
        Target("coreml-fp32", "coreml", "Core ML, float32 compute"),
        Target("coreml-int8", "coreml", "Core ML, int8 activations and weights (pt2e static, lowerkit quantizer)", True),
        Target("coreml-w8", "coreml", "Core ML, int8 per-channel linear weight quantization"),
        Target("coreml-w4", "coreml", "Core ML, int4 per-block (32) linear weight quantization, iOS18"),
        Target("coreml-palettize4", "coreml", "Core ML, 4-bit palettized weights: linear (torchao codebook, a table per 16 input columns) and conv and the rest (k-means, a table per 16 output channels), iOS18"),
        *(
            Target(f"coreml-palettize{bits}", "coreml", f"Core ML, {bits}-bit k-means palettization of every weighted op (a table per 16 output channels), iOS18")
            for bits in (2, 3, 6, 8)
        ),
        Target("tosa-int", "arm", "TOSA-1.0+INT flatbuffer (int8 quantized)", True),
        Target("tosa-fp", "arm", "TOSA-1.0+FP flatbuffer (float)"),
        Target("tosa-int16", "arm", "TOSA-1.0+INT+int16 flatbuffer (a16w8: int16 activations, int8 weights)", True),
        *(
            Target(f"ethos-u{npu}-{macs}", "arm", f"Arm Ethos-U{npu}, {macs} MACs (int8 or --a16w8, vela-compiled)", True)
            for npu, macs in ETHOS_U_CONFIGS
        ),
        # ExecuTorch's aot_arm_compiler has one `vgf` target: TOSA-1.0+INT with --quantize, +FP without.
        Target("vgf-int", "arm", "VGF (TOSA-1.0+INT, int8 quantized, converted by Arm's ML SDK model converter)", True),
        Target("vgf-fp", "arm", "VGF (TOSA-1.0+FP, float, converted by Arm's ML SDK model converter)"),
    )
}


def get(name: str) -> Target:
    """The target called `name`, or a UsageError listing the valid ones."""
    try:
        return TARGETS[name]
    except KeyError:
        raise UsageError(
            f"unknown target '{name}'.{did_you_mean(name, list(TARGETS))} Valid targets: {', '.join(TARGETS)}"
        ) from None
