"""The Core ML options: their flags, help, which targets take them, and the settings they fill.

Adding a Core ML flag is one `TargetOption` in `OPTIONS` (and, if it changes the lowering, a
field of `CoreMLSettings` its `field` names): `lower --help`, the checks, FLEET.toml and the
cache key follow.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from lowerkit.cli.backend import TargetOption
from lowerkit.cli.backends.coreml.targets import COREML_RECIPES, RECIPE_TARGETS, is_coreml
from lowerkit.cli.errors import UsageError
from lowerkit.cli.options import Target

if TYPE_CHECKING:
    from lowerkit.coreml_preprocess.compression import WeightCompression
    from lowerkit.coreml_preprocess.options import CoreMLCompileOptions


@dataclass(frozen=True)
class CoreMLSettings:
    """The settings of a Core ML lowering (`LowerOptions.settings`); each field is in the cache key."""

    #: Core ML MIL pass names replacing the default pipeline.
    pass_names: tuple[str, ...] | None = None
    #: A TOML compression recipe (global + per-layer rules) for `coreml` / `coreml-fp32`.
    recipe: Path | None = None
    #: Enumerated input shapes: ((input name, (shape, shape, ...)), ...).
    shapes: tuple[tuple[str, tuple[tuple[int, ...], ...]], ...] | None = None


def pipeline(pass_names: Sequence[str] | None) -> str | tuple[str, ...]:
    """The `pass_pipeline` lowerkit.coreml_preprocess takes: the names, or "default"."""
    return tuple(pass_names) if pass_names is not None else "default"


def _check_pass_names(target: Target, pass_names: Sequence[str]) -> CoreMLCompileOptions:
    """The CoreMLCompileOptions for `target`; a UsageError for a bad MIL pass name."""
    from lowerkit.coreml_preprocess.errors import CoreMLOptionsError
    from lowerkit.coreml_preprocess.recipes import compile_options_for

    try:
        return compile_options_for(COREML_RECIPES[target.name], pass_pipeline=pipeline(pass_names))
    except CoreMLOptionsError as error:  # PassPipelineError included
        raise UsageError(str(error)) from None


def load_recipe(target: Target, path: Path) -> WeightCompression:
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


def _pass_names(value: str) -> list[str] | None:
    """`--coreml-passes` text: comma-separated names, or @FILE with one per line ("": not given)."""
    if not value:
        return None
    if value.startswith("@"):
        path = Path(value[1:])
        if not path.is_file():
            raise UsageError(f"Core ML pass file '{path}' does not exist")
        lines = path.read_text().splitlines()
        return [line.strip() for line in lines if line.strip() and not line.startswith("#")]
    return [name.strip() for name in value.split(",") if name.strip()]


def _checked_pass_names(target: Target, pass_names: Sequence[str]) -> tuple[str, ...]:
    _check_pass_names(target, pass_names)
    return tuple(pass_names)


def _checked_recipe(target: Target, path: Path) -> Path:
    load_recipe(target, path)  # a bad file is one line, before any work
    return path


def _parsed_shapes(target: Target, text: str) -> tuple[tuple[str, tuple[tuple[int, ...], ...]], ...]:
    """`--shapes NAME=1x3x32x32,1x3x64x64[;NAME2=...]` parsed; a UsageError (one line) if malformed."""
    from lowerkit.coreml_preprocess.errors import CoreMLOptionsError
    from lowerkit.coreml_preprocess.shapes import parse_shapes as parse

    try:
        return tuple(parse(text).items())
    except CoreMLOptionsError as error:
        raise UsageError(f"--shapes: {error}") from None


#: Every option only Core ML targets take, in `lower --help` order.
OPTIONS: tuple[TargetOption, ...] = (
    TargetOption(
        "--coreml-passes", "Core ML targets", is_coreml, field="pass_names", parse=_pass_names,
        convert=_checked_pass_names, fleet=True, fleet_list="MIL pass names",
        help="Core ML MIL pass names, comma-separated, or @FILE (one per line).",
    ),
    TargetOption(
        "--recipe", "Core ML targets", is_coreml, kind="path", field="recipe", convert=_checked_recipe, fleet=True,
        help="Core ML compression recipe (TOML, see README) for -t coreml / coreml-fp32.",
    ),
    TargetOption(
        "--shapes", "Core ML targets", is_coreml, field="shapes", convert=_parsed_shapes, fleet=True,
        help="Core ML enumerated input shapes: NAME=1x3x32x32,1x3x64x64[;NAME2=...].",
    ),
    TargetOption(
        "--mlpackage", "Core ML targets", is_coreml, kind="path", help="Also write the Core ML model package here."
    ),
)
