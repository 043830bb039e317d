"""Lower to ExecuTorch with the Core ML delegate: a thin call to lowerkit.coreml_preprocess.lower_to_coreml.

The recipes (quantization, palettization, deployment targets) live in coreml-preprocess; this
module maps `-t` targets to them and turns the library's errors into the CLI's.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from lowerkit.cli.errors import LoweringError, UsageError
from lowerkit.cli.model_source import Inputs, ModelSource
from lowerkit.cli.progress import Steps
from lowerkit.cli.result import Lowered
from lowerkit.cli.targets import Target

if TYPE_CHECKING:
    from lowerkit.coreml_preprocess import CoreMLCompileOptions, WeightCompression

#: CLI target name -> lowerkit.coreml_preprocess recipe name.
COREML_RECIPES = {
    "coreml": "fp16",
    "coreml-fp32": "fp32",
    "coreml-int8": "int8",
    "coreml-w8": "w8",
    "coreml-w4": "w4",
    "coreml-palettize4": "palettize4",
    "coreml-palettize2": "palettize2",
    "coreml-palettize3": "palettize3",
    "coreml-palettize6": "palettize6",
    "coreml-palettize8": "palettize8",
}
#: Targets a --recipe file may be added to (they compress nothing themselves).
RECIPE_TARGETS = ("coreml", "coreml-fp32")


def _pipeline(pass_names: list[str] | None) -> str | tuple[str, ...]:
    return tuple(pass_names) if pass_names is not None else "default"


def compile_options(target: Target, pass_names: list[str] | None) -> CoreMLCompileOptions:
    """The CoreMLCompileOptions for `target`; a UsageError for a bad MIL pass name."""
    from lowerkit.coreml_preprocess import CoreMLOptionsError, compile_options_for

    try:
        return compile_options_for(COREML_RECIPES[target.name], pass_pipeline=_pipeline(pass_names))
    except CoreMLOptionsError as error:  # PassPipelineError included
        raise UsageError(str(error)) from None


def load_recipe(target: Target, path: Path) -> WeightCompression:
    """The compression recipe file's content; a UsageError (one line) for a bad file or target."""
    from lowerkit.coreml_preprocess import CoreMLOptionsError
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


def parse_shapes(text: str) -> dict[str, tuple[tuple[int, ...], ...]]:
    """`--shapes NAME=1x3x32x32,1x3x64x64[;NAME2=...]` parsed; a UsageError (one line) if malformed."""
    from lowerkit.coreml_preprocess import CoreMLOptionsError
    from lowerkit.coreml_preprocess.shapes import parse_shapes as parse

    try:
        return parse(text)
    except CoreMLOptionsError as error:
        raise UsageError(f"--shapes: {error}") from None


def lower(
    source: ModelSource,
    target: Target,
    *,
    calibration: list[Inputs],
    pass_names: list[str] | None,
    steps: Steps,
    recipe: Path | None = None,
    shapes: dict[str, tuple[tuple[int, ...], ...]] | None = None,
    keep_float: tuple[str, ...] = (),
) -> Lowered:
    """Lower with the target's recipe (quantize, partition to Core ML, serialize a .pte)."""
    from lowerkit.coreml_preprocess import CoreMLLoweringError, CoreMLOptionsError, lower_to_coreml

    compression = load_recipe(target, recipe) if recipe is not None else None
    model = source.module if source.module is not None else source.export()
    try:
        lowering = lower_to_coreml(
            model,
            source.example_inputs,
            COREML_RECIPES[target.name],
            calibration=calibration or None,
            pass_pipeline=_pipeline(pass_names),
            progress=steps.step,
            weight_compression=compression,
            enumerated_shapes=shapes,
            keep_float=keep_float,
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
