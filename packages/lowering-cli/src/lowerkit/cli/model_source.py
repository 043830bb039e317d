"""Resolve the MODEL argument: `zoo:NAME`, `et:NAME`, `hf:DIR`, `tv:NAME`, a `.pt2` file, or `package.module:factory`.

`load(spec, options)` is the one entry point; the `et:`, `hf:` and `tv:` sources live in
`lowerkit.cli.sources` (one module each), `SourceOptions` says how to build (weights file,
task, random weights, input sizes) and defaults to what the source alone says. What every
source builds, a `ModelSource`, is defined in `lowerkit.cli.sources.model`.
"""

from __future__ import annotations

import importlib
from pathlib import Path

import torch

from lowerkit import zoo
from lowerkit.cli.errors import UsageError
from lowerkit.cli.sources.kinds import kind_of
from lowerkit.cli.sources.model import ModelSource
from lowerkit.cli.sources.options import DEFAULT, SourceOptions


def load(spec: str, options: SourceOptions = DEFAULT) -> ModelSource:
    """Turn a MODEL argument into a ModelSource; a UsageError says what was wrong."""
    kind = kind_of(spec)
    if kind == "zoo":
        return _from_zoo(spec.removeprefix("zoo:"), options)
    if kind == "et":
        from lowerkit.cli.sources import et

        return et.load(spec.removeprefix("et:"), options)
    if kind == "hf":
        from lowerkit.cli.sources import hf

        return hf.load(Path(spec.removeprefix("hf:")), options)
    if kind == "tv":
        from lowerkit.cli.sources import tv

        return tv.load(spec.removeprefix("tv:"), options)
    if kind == "pt2":
        if options != DEFAULT:
            raise UsageError(f"'{spec}' is an exported program with its weights and inputs; {', '.join(options.given())} do not apply to it")
        return _from_pt2(Path(spec))
    return _from_factory(spec, options)


def _from_zoo(name: str, options: SourceOptions) -> ModelSource:
    try:
        entry = zoo.get(name)
    except KeyError as error:
        raise UsageError(str(error.args[0])) from None
    _only_weights(f"zoo:{name}", options)
    module = entry.module()
    if options.weights is not None:
        from lowerkit.cli.sources import weights

        weights.load_into(module, options.weights, model=f"zoo:{name}")
    return ModelSource(
        name=entry.name,
        example_inputs=entry.example_inputs(),
        module=module,
        sampler=lambda count: entry.calibration(count),
    )


def _only_weights(what: str, options: SourceOptions) -> None:
    others = [flag for flag in options.given() if flag != "--weights"]
    if others:
        raise UsageError(f"{', '.join(others)} do(es) not apply to {what} (only --weights does)")


def _from_pt2(path: Path) -> ModelSource:
    if not path.is_file():
        raise UsageError(f"model file '{path}' does not exist")
    try:
        exported = torch.export.load(str(path))
    except Exception as error:  # torch raises many types for a bad archive
        raise UsageError(
            f"'{path}' is not a readable torch.export archive ({type(error).__name__}: "
            f"{str(error).splitlines()[0] if str(error) else 'no detail'}); save one with torch.export.save"
        ) from None
    inputs = exported.example_inputs
    if inputs is None:
        raise UsageError(
            f"'{path}' holds no example inputs; export with example inputs and save it again"
        )
    args, kwargs = inputs
    if kwargs:
        raise UsageError(f"'{path}' takes keyword inputs, which lowerkit does not support yet")
    return ModelSource(name=path.stem, example_inputs=tuple(args), exported=exported)


def _from_factory(spec: str, options: SourceOptions) -> ModelSource:
    module_name, _, attribute = spec.partition(":")
    try:
        namespace = importlib.import_module(module_name)
    except Exception as error:
        raise UsageError(
            f"cannot import '{module_name}' for model '{spec}': {type(error).__name__}: {error}"
        ) from None
    factory = getattr(namespace, attribute, None)
    if not callable(factory):
        raise UsageError(f"'{module_name}' has no callable '{attribute}' (model '{spec}')")
    _only_weights(spec, options)
    try:
        made = factory()
    except Exception as error:
        raise UsageError(f"'{spec}' raised {type(error).__name__}: {error}") from None
    if (
        not isinstance(made, tuple)
        or len(made) != 2
        or not isinstance(made[0], torch.nn.Module)
        or not isinstance(made[1], tuple)
        or not all(isinstance(t, torch.Tensor) for t in made[1])
    ):
        raise UsageError(
            f"'{spec}' must return (torch.nn.Module, tuple of example input tensors), "
            f"got {type(made).__name__}"
        )
    module, example_inputs = made
    if options.weights is not None:
        from lowerkit.cli.sources import weights

        weights.load_into(module, options.weights, model=spec)
    return ModelSource(name=attribute, example_inputs=example_inputs, module=module.eval())
