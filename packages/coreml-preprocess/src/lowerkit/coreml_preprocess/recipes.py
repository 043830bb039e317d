"""Core ML lowering recipes: compute precision, weight compression and deployment target by name.

The recipes the ``lowerkit`` command offers as ``-t coreml[-...]`` targets:

* ``fp16`` / ``fp32``: float compute, weights as they are;
* ``int8``: activations and weights int8, pt2e static quantization with lowerkit's
  ``CoreMLQuantizer`` (calibrated), iOS17;
* ``w8`` / ``w4``: Core ML linear weight quantization after conversion (int8 per channel;
  int4 per block of 32, iOS18);
* ``palettize4``: 4-bit palettized linear weights (torchao codebook, a table per 16 input
  columns where the width allows it) and every other weighted op (convolutions, ...) 4-bit
  k-means palettized after conversion (a table per 16 output channels), iOS18;
* ``palettize2`` / ``palettize3`` / ``palettize6`` / ``palettize8``: every weighted op k-means
  palettized after conversion (a table per 16 output channels), iOS18.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any

import coremltools as ct

from lowerkit.coreml_preprocess.compression import WEIGHT_THRESHOLD, WeightCompression
from lowerkit.coreml_preprocess.errors import CoreMLOptionsError
from lowerkit.coreml_preprocess.options import CoreMLCompileOptions
from lowerkit.pass_infra.helpers.suggest import did_you_mean

__all__ = [
    "PALETTE_CHANNEL_GROUP", "RECIPES", "CoreMLRecipe", "compile_options_for", "get_recipe",
]


@dataclass(frozen=True)
class CoreMLRecipe:
    """A named way to lower to Core ML; ``torch_quantization`` runs before export."""

    name: str
    summary: str
    compute_precision: str = "float16"
    #: ``op_linear_quantizer_config`` (post-conversion weight quantization), or None.
    weight_config: Mapping[str, Any] | None = None
    #: Used when the caller names no deployment target.
    default_deployment_target: str | None = None
    #: The oldest deployment target whose Core ML has the ops the recipe emits.
    minimum_deployment_target: str | None = None
    #: ``"static_int8"`` (pt2e, calibrated), ``"palettize4"`` (torchao codebook) or None.
    torch_quantization: str | None = None
    #: Whether ``calibration`` inputs are used.
    calibrates: bool = False
    #: Compression of every weighted op after conversion (a compile option), or None.
    weight_compression: WeightCompression | None = None

    @property
    def compresses_weights(self) -> bool:
        """Whether the recipe compresses weights itself (a recipe file then cannot be added)."""
        return (
            self.weight_config is not None or self.weight_compression is not None
            or self.torch_quantization is not None
        )


_INT8_WEIGHTS = {"mode": "linear_symmetric", "dtype": "int8", "granularity": "per_channel"}
_INT4_WEIGHTS = {"mode": "linear_symmetric", "dtype": "int4", "granularity": "per_block", "block_size": 32}
#: Output channels that share one lookup table in the post-conversion palettization.
PALETTE_CHANNEL_GROUP = 16


def _palettized(nbits: int) -> WeightCompression:
    return WeightCompression(
        {"method": "palettize", "nbits": nbits, "mode": "kmeans",
         "granularity": "per_grouped_channel", "group_size": PALETTE_CHANNEL_GROUP},
        weight_threshold=WEIGHT_THRESHOLD,
    )


RECIPES: Mapping[str, CoreMLRecipe] = {
    r.name: r
    for r in (
        CoreMLRecipe("fp16", "float16 compute"),
        CoreMLRecipe("fp32", "float32 compute", compute_precision="float32"),
        CoreMLRecipe(
            "int8", "int8 activations and weights (pt2e static, lowerkit CoreMLQuantizer)",
            default_deployment_target="iOS17", minimum_deployment_target="iOS17",
            torch_quantization="static_int8", calibrates=True,
        ),
        CoreMLRecipe(
            "w8", "int8 per-channel linear weight quantization", weight_config=_INT8_WEIGHTS,
            default_deployment_target="iOS17", minimum_deployment_target="iOS16",
        ),
        CoreMLRecipe(
            "w4", "int4 per-block (32) linear weight quantization", weight_config=_INT4_WEIGHTS,
            default_deployment_target="iOS18", minimum_deployment_target="iOS18",
        ),
        CoreMLRecipe(
            "palettize4",
            "4-bit palettized weights: linear by torchao's codebook (a table per 16 input columns), "
            "every other weighted op by Core ML k-means (a table per 16 output channels)",
            default_deployment_target="iOS18", minimum_deployment_target="iOS18",
            torch_quantization="palettize4", weight_compression=_palettized(4),
        ),
        *(
            CoreMLRecipe(
                f"palettize{bits}",
                f"{bits}-bit k-means palettization of every weighted op (a table per 16 output channels)",
                default_deployment_target="iOS18", minimum_deployment_target="iOS18",
                weight_compression=_palettized(bits),
            )
            for bits in (2, 3, 6, 8)
        ),
    )
}


def get_recipe(name: str) -> CoreMLRecipe:
    """The recipe called `name`; a CoreMLOptionsError with did-you-mean otherwise."""
    try:
        return RECIPES[name]
    except (KeyError, TypeError):
        raise CoreMLOptionsError(
            f"unknown Core ML recipe {name!r}.{did_you_mean(name, list(RECIPES), ignore_case=True)} "
            f"Valid recipes: {', '.join(RECIPES)}."
        ) from None


def _deployment_target(recipe: CoreMLRecipe, requested: str | None) -> str | None:
    target = requested if requested is not None else recipe.default_deployment_target
    if target is None or recipe.minimum_deployment_target is None:
        return target
    chosen = CoreMLCompileOptions(minimum_deployment_target=target).minimum_deployment_target
    if chosen < ct.target[recipe.minimum_deployment_target]:
        raise CoreMLOptionsError(
            f"recipe '{recipe.name}' needs deployment target {recipe.minimum_deployment_target} or later, "
            f"got {target}; omit it to use {recipe.default_deployment_target}."
        )
    return target


def compile_options_for(
    recipe: CoreMLRecipe | str,
    *,
    deployment_target: str | None = None,
    pass_pipeline: str | Sequence[str] = "default",
    weight_compression: WeightCompression | None = None,
) -> CoreMLCompileOptions:
    """The CoreMLCompileOptions of a recipe (deployment target: given, else the recipe's).

    `weight_compression` (e.g. from a recipe file) goes with ``fp16`` / ``fp32`` only; the
    deployment target then defaults to the oldest that stores its settings.
    """
    chosen = get_recipe(recipe) if isinstance(recipe, str) else recipe
    compression = chosen.weight_compression
    if weight_compression is not None:
        if chosen.compresses_weights:
            raise CoreMLOptionsError(
                f"recipe '{chosen.name}' compresses weights itself; use 'fp16' or 'fp32' with a "
                "weight compression (recipe file)."
            )
        compression = weight_compression
        needed = weight_compression.minimum_deployment_target()
        chosen = replace(chosen, minimum_deployment_target=needed, default_deployment_target=needed)
    return CoreMLCompileOptions(
        compute_precision=chosen.compute_precision,
        minimum_deployment_target=_deployment_target(chosen, deployment_target),
        op_linear_quantizer_config=chosen.weight_config,
        pass_pipeline=pass_pipeline,
        weight_compression=compression,
    )
