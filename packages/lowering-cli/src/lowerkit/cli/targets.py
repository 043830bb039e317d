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
        Target("ethos-u55-128", "arm", "Arm Ethos-U55, 128 MACs (int8, vela-compiled)", True),
        Target("ethos-u85-256", "arm", "Arm Ethos-U85, 256 MACs (int8, vela-compiled)", True),
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
