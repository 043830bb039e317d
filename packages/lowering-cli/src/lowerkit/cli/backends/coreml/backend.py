"""The Core ML backend: a thin call to lowerkit.coreml_preprocess.lower_to_coreml per target.

The recipes (quantization, palettization, deployment targets) live in coreml-preprocess; this
module maps `-t` targets to them, checks the Core ML options and turns the library's errors
into the CLI's.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

from lowerkit.cli.backend import Backend, DebugRequest, Given, TargetOption
from lowerkit.cli.errors import LoweringError, UsageError
from lowerkit.cli.options import LowerOptions, Target
from lowerkit.cli.progress import Steps
from lowerkit.cli.result import Lowered

if TYPE_CHECKING:
    from lowerkit.cli.sources.model import Inputs, ModelSource
    from lowerkit.coreml_preprocess.compression import WeightCompression
    from lowerkit.coreml_preprocess.options import CoreMLCompileOptions


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


#: What `--verify` and the demo say of a Core ML program.
COREML_CANNOT_RUN = (
    "Core ML itself cannot run on Linux: the Core ML program was checked through torch "
    "and its decoded weights, not executed"
)

_PALETTIZED = "coreml-palettize*"

#: Adding a Core ML target is one row here (and its recipe in lowerkit.coreml_preprocess).
TARGET_TABLE: tuple[CoreMLTarget, ...] = (
    CoreMLTarget("coreml", "fp16", "Core ML, float16 compute", takes_recipe=True),
    CoreMLTarget("coreml-fp32", "fp32", "Core ML, float32 compute", takes_recipe=True),
    CoreMLTarget(
        "coreml-int8", "int8", "Core ML, int8 activations and weights (pt2e static, lowerkit quantizer)", True,
        debug="activations",
    ),
    CoreMLTarget("coreml-w8", "w8", "Core ML, int8 per-channel linear weight quantization", debug="weights"),
    CoreMLTarget("coreml-w4", "w4", "Core ML, int4 per-block (32) linear weight quantization, iOS18", debug="weights"),
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
_FAMILY = "coreml"
_BY_NAME = {row.name: row for row in TARGET_TABLE}

#: CLI target name -> lowerkit.coreml_preprocess recipe name.
COREML_RECIPES = {row.name: row.recipe for row in TARGET_TABLE}
#: Targets a --recipe file may be added to (they compress nothing themselves).
RECIPE_TARGETS = tuple(row.name for row in TARGET_TABLE if row.takes_recipe)


def _is_coreml(target: Target) -> bool:
    return target.name in _BY_NAME


def _pipeline(pass_names: tuple[str, ...] | list[str] | None) -> str | tuple[str, ...]:
    return tuple(pass_names) if pass_names is not None else "default"


def _check_pass_names(target: Target, pass_names: tuple[str, ...] | list[str]) -> CoreMLCompileOptions:
    """The CoreMLCompileOptions for `target`; a UsageError for a bad MIL pass name."""
    from lowerkit.coreml_preprocess.errors import CoreMLOptionsError
    from lowerkit.coreml_preprocess.recipes import compile_options_for

    try:
        return compile_options_for(COREML_RECIPES[target.name], pass_pipeline=_pipeline(pass_names))
    except CoreMLOptionsError as error:  # PassPipelineError included
        raise UsageError(str(error)) from None


def _load_recipe(target: Target, path: Path) -> WeightCompression:
    """The compression recipe file's content; a UsageError (one line) for a bad file or target."""
    from lowerkit.coreml_preprocess.errors import CoreMLOptionsError
    from lowerkit.coreml_preprocess.recipe_file import load_recipe as load

    if target.name not in RECIPE_TARGETS:
        raise UsageError(
            f"--recipe applies to {' or '.join(RECIPE_TARGETS)} (targets that compress nothing themselves), "
            f"not '{target.name}'"
        )
    try:
        return load(path)
    except CoreMLOptionsError as error:
        raise UsageError(str(error)) from None


def _parse_shapes(text: str) -> dict[str, tuple[tuple[int, ...], ...]]:
    """`--shapes NAME=1x3x32x32,1x3x64x64[;NAME2=...]` parsed; a UsageError (one line) if malformed."""
    from lowerkit.coreml_preprocess.errors import CoreMLOptionsError
    from lowerkit.coreml_preprocess.shapes import parse_shapes as parse

    try:
        return parse(text)
    except CoreMLOptionsError as error:
        raise UsageError(f"--shapes: {error}") from None


class CoreMLBackend(Backend):
    """Core ML delegate programs through lowerkit.coreml_preprocess."""

    family = _FAMILY
    title = "Core ML"
    preload = ("lowerkit.coreml_quantizer", "lowerkit.coreml_preprocess", "lowerkit.coreml_compiler_ops")
    verification_figures = (("output_sqnr_db", "output SQNR"), ("weight_sqnr_db", "weight SQNR"))
    targets = tuple(Target(row.name, _FAMILY, row.summary, row.calibrates) for row in TARGET_TABLE)
    options = (
        TargetOption("--mlpackage", "Core ML targets", _is_coreml),
        TargetOption("--coreml-passes", "Core ML targets", _is_coreml),
        TargetOption("--recipe", "Core ML targets", _is_coreml),
        TargetOption("--shapes", "Core ML targets", _is_coreml),
    )

    def settings(self, target: Target, given: Given) -> dict[str, Any]:
        """MIL pass names (checked), the recipe file (read) and the enumerated shapes (parsed), before any work."""
        pass_names = given.get("--coreml-passes")
        if pass_names is not None:
            _check_pass_names(target, pass_names)
        recipe: Path | None = given.get("--recipe")
        if recipe is not None:
            _load_recipe(target, recipe)  # a bad file is one line, before any work
        shapes: str | None = given.get("--shapes")
        return {
            "pass_names": tuple(pass_names) if pass_names is not None else None,
            "recipe": recipe,
            "shapes": tuple(_parse_shapes(shapes).items()) if shapes is not None else None,
        }

    def lower(self, source: ModelSource, options: LowerOptions, *, calibration: list[Inputs], steps: Steps) -> Lowered:
        """Lower with the target's recipe (quantize, partition to Core ML, serialize a .pte)."""
        from lowerkit.coreml_preprocess.errors import CoreMLLoweringError, CoreMLOptionsError
        from lowerkit.coreml_preprocess.lowering import lower_to_coreml

        target = options.target
        compression = _load_recipe(target, options.recipe) if options.recipe is not None else None
        model = source.module if source.module is not None else source.export()
        try:
            lowering = lower_to_coreml(
                model,
                source.example_inputs,
                COREML_RECIPES[target.name],
                calibration=calibration or None,
                pass_pipeline=_pipeline(options.pass_names),
                progress=steps.step,
                weight_compression=compression,
                enumerated_shapes=dict(options.shapes) if options.shapes is not None else None,
                keep_float=options.keep_float,
            )
        except CoreMLOptionsError as error:
            raise UsageError(str(error)) from None
        except CoreMLLoweringError as error:
            raise LoweringError(str(error)) from None
        lowered = Lowered(model=source.name, target=target, pte=lowering.pte, seconds=steps.seconds)
        lowered.warnings.extend(lowering.warnings)
        lowered.cpu_ops = list(lowering.cpu_ops)
        lowered.reference = lowering
        return lowered

    def verify(self, lowered: Lowered, source: ModelSource) -> dict[str, Any]:
        """Quantization SQNR in torch and decoded-weight SQNR (Core ML itself cannot run on Linux)."""
        from lowerkit.cli.backends.coreml.verify import verify_coreml

        return verify_coreml(lowered, source)

    def debuggable(self, target: Target) -> bool:
        """The targets that quantize activations or compress weights."""
        return _BY_NAME[target.name].debug is not None

    def debug(self, source: ModelSource, target: Target, request: DebugRequest) -> Any:
        """coreml_preprocess' report: int8 activations (threshold in dB, default 20) or compressed weights."""
        from lowerkit.coreml_preprocess.numerics import (
            NoQuantizedLayerError,
            debug_coreml,
            debug_coreml_weights,
        )

        row = _BY_NAME[target.name]
        model = source.module if source.module is not None else source.export()
        try:
            if row.debug == "weights":
                return debug_coreml_weights(model, source.example_inputs, row.recipe, model_name=source.name)
            return debug_coreml(
                model, source.example_inputs, calibration=request.calibration or None, keep_float=request.keep_float,
                threshold_db=20.0 if request.threshold is None else request.threshold, scan=request.scan,
                model_name=source.name, target_sqnr_db=request.target_sqnr, search=request.search,
            )
        except NoQuantizedLayerError as error:
            raise UsageError(str(error)) from None

    def pattern(self, target: Target) -> str | None:
        """"coreml-palettize*" for the palettizing targets."""
        return _BY_NAME[target.name].pattern

    def write_outputs(self, lowered: Lowered, options: LowerOptions, given: Given) -> list[str]:
        """The Core ML model package (--mlpackage): the program's one Core ML delegate."""
        mlpackage: Path | None = given.get("--mlpackage")
        if mlpackage is not None:
            from lowerkit.cli.backends.coreml.payload import write_mlpackage
            from lowerkit.cli.inspect_pte import payloads

            found = [p for backend, p in payloads(lowered.pte) if backend == "CoreMLBackend"]
            if len(found) != 1:
                raise LoweringError(f"--mlpackage needs exactly one Core ML delegate, the program has {len(found)}")
            write_mlpackage(found[0], mlpackage)
        return []


#: The Core ML backend (registered in `targets`).
COREML = CoreMLBackend()
