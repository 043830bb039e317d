"""What each zoo model is, without building it: no torch import.

`lowerkit zoo` and the rest of the CLI's start-up read this catalogue; `lowerkit.zoo.models()`
builds the models themselves (and imports torch). A test holds the two in agreement.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class ZooEntry:
    """A zoo model as `lowerkit zoo` lists it."""

    name: str
    description: str
    #: Number of parameters, tied tensors counted once (`ZooModel.parameter_count()`).
    parameters: int
    #: Shapes of the example inputs (`ZooModel.example_inputs()`).
    input_shapes: tuple[tuple[int, ...], ...]
    #: Backend families the model is meant for ("coreml", "arm").
    backends: tuple[str, ...] = ("coreml", "arm")


ENTRIES: tuple[ZooEntry, ...] = (
    ZooEntry(
        "conv_linear",
        "Conv2d + ReLU + pooling + Linear: the smallest useful model",
        314,
        ((1, 3, 16, 16),),
    ),
    ZooEntry(
        "cnn9_layernorm",
        "9-conv CNN with channel LayerNorm (~50K parameters)",
        56_202,
        ((1, 3, 32, 32),),
    ),
    ZooEntry(
        "resnet8",
        "ResNet8, MLPerf Tiny image classification (CIFAR-10 shape)",
        78_042,
        ((1, 3, 32, 32),),
    ),
    ZooEntry(
        "mobilenet_v1_025",
        "MobileNetV1 alpha 0.25, MLPerf Tiny visual wake words (96x96)",
        213_586,
        ((1, 3, 96, 96),),
    ),
    ZooEntry(
        "ds_cnn",
        "DS-CNN small, MLPerf Tiny keyword spotting (49x10 MFCC)",
        23_180,
        ((1, 1, 49, 10),),
    ),
    ZooEntry(
        "tiny_lm",
        "2-layer transformer LM whose embedding table is tied to its output head",
        117_504,
        ((1, 16),),
        backends=("coreml",),
    ),
)


def names() -> list[str]:
    """All zoo model names, in the registry's order."""
    return [entry.name for entry in ENTRIES]

