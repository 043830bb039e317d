"""The Core ML targets: one row each (`TARGET_TABLE`), each a recipe of lowerkit.coreml_preprocess."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal

from lowerkit.cli.options import Target

#: What `--verify` and the demo say of a Core ML program.
COREML_CANNOT_RUN = (
    "Core ML itself cannot run on Linux: the Core ML program was checked through torch "
    "and its decoded weights, not executed"
)


@dataclass(frozen=True)
class CoreMLTarget:
    """One Core ML target: the CLI's name, lowerkit.coreml_preprocess' recipe, and what `debug` compares."""

    name: str
    recipe: str
    summary: str
    calibrates: bool = False
    #: What `lowerkit debug` compares with float: quantized activations, compressed weights, or nothing.
    debug: Literal["activations", "weights"] | None = None
    #: Whether a --recipe file may be added (the target compresses nothing itself).
    takes_recipe: bool = False
    #: The name pattern of its group, for messages that list targets.
    pattern: str | None = None
    #: ``export_llm``'s Core ML settings for it beyond `LLM_COREML` (None: its LLM export has no such target).
    llm: tuple[tuple[str, Any], ...] | None = None
    #: ``export_static_llm_coreml``'s flags for it, the prefill + decode export (None: no such target).
    #: That export always compresses linear weights to 4 bits (its ``--linear_quantize``).
    prefill_decode: tuple[str, ...] | None = None


_PALETTIZED = "coreml-palettize*"
#: ExecuTorch's LLM export to Core ML (fp16 compute; iOS 18, which its 4-bit weights need).
LLM_COREML: dict[str, Any] = {"backend.coreml.enabled": True, "backend.coreml.ios": 18}

#: Adding a Core ML target is one row here (and its recipe in lowerkit.coreml_preprocess).
TARGET_TABLE: tuple[CoreMLTarget, ...] = (
    CoreMLTarget(
        "coreml", "fp16", "Core ML, float16 compute", takes_recipe=True, llm=(),
        prefill_decode=("--linear_quantize", "c4w"),
    ),
    CoreMLTarget("coreml-fp32", "fp32", "Core ML, float32 compute", takes_recipe=True),
    CoreMLTarget(
        "coreml-int8", "int8", "Core ML, int8 activations and weights (pt2e static, lowerkit quantizer)", True,
        debug="activations", llm=(("quantization.pt2e_quantize", "coreml_8a_c8w"),),
    ),
    CoreMLTarget("coreml-w8", "w8", "Core ML, int8 per-channel linear weight quantization", debug="weights"),
    CoreMLTarget(
        "coreml-w4", "w4", "Core ML, int4 per-block (32) linear weight quantization, iOS18", debug="weights",
        llm=(("backend.coreml.quantize", "b4w"),), prefill_decode=("--linear_quantize", "b4w"),
    ),
    CoreMLTarget(
        "coreml-palettize4", "palettize4",
        "Core ML, 4-bit palettized weights: linear (torchao codebook, a table per 16 input columns) and conv and "
        "the rest (k-means, a table per 16 output channels), iOS18",
        debug="weights", pattern=_PALETTIZED,
    ),
    *(
        CoreMLTarget(
            f"coreml-palettize{bits}", f"palettize{bits}",
            f"Core ML, {bits}-bit k-means palettization of every weighted op (a table per 16 output channels), iOS18",
            debug="weights", pattern=_PALETTIZED,
        )
        for bits in (2, 3, 6, 8)
    ),
)
#: `Target.backend` of the Core ML targets.
FAMILY = "coreml"
BY_NAME = {row.name: row for row in TARGET_TABLE}

#: CLI target name -> lowerkit.coreml_preprocess recipe name.
COREML_RECIPES = {row.name: row.recipe for row in TARGET_TABLE}
#: Targets a --recipe file may be added to (they compress nothing themselves).
RECIPE_TARGETS = tuple(row.name for row in TARGET_TABLE if row.takes_recipe)


def llm_overrides(target: Target) -> dict[str, Any] | None:
    """``export_llm``'s settings for `target`; None when its LLM export has no such target."""
    extra = BY_NAME[target.name].llm
    return None if extra is None else {**LLM_COREML, **dict(extra)}


def prefill_decode_flags(target: Target) -> list[str] | None:
    """``export_static_llm_coreml``'s flags for `target`; None when that export has no such target."""
    flags = BY_NAME[target.name].prefill_decode
    return None if flags is None else list(flags)


def is_coreml(target: Target) -> bool:
    """Whether `target` is a Core ML target."""
    return target.name in BY_NAME
