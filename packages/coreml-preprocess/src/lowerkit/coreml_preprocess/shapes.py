"""Flexible input shapes for Core ML: enumerated shapes, exported through ``torch.export`` dynamic dims.

``parse_shapes("x=1x3x32x32,1x3x64x64")`` gives ``{"x": ((1, 3, 32, 32), (1, 3, 64, 64))}``;
``export_with_shapes`` exports a model with a ``torch.export.Dim`` for every dimension that
differs between an input's shapes, so ExecuTorch's enumerated-shape encoding (compile spec
``enumerated_shapes``) can name them and preprocess gives the Core ML model ``ct.EnumeratedShapes``
inputs (the Neural Engine needs enumerated shapes, not ranges).
"""

from __future__ import annotations

import inspect
from collections.abc import Mapping, Sequence
from typing import Any

from lowerkit.coreml_preprocess.errors import CoreMLOptionsError

__all__ = ["export_with_shapes", "parse_shapes"]

Shapes = dict[str, tuple[tuple[int, ...], ...]]


def parse_shapes(text: str, default_name: str = "x") -> Shapes:
    """``"x=1x3x32x32,1x3x64x64;y=1x8,2x8"`` (name optional for one input) -> shapes by input name."""
    result: Shapes = {}
    for part in (p.strip() for p in text.split(";")):
        if not part:
            continue
        name, _, listed = part.rpartition("=")
        name = name.strip() or default_name
        try:
            shapes = tuple(
                tuple(int(d) for d in shape.strip().lower().split("x")) for shape in listed.split(",") if shape.strip()
            )
        except ValueError:
            raise CoreMLOptionsError(
                f"invalid shapes {part!r}: write NAME=1x3x32x32,1x3x64x64 (dimensions joined by 'x', "
                "shapes by ',', inputs by ';')."
            ) from None
        if name in result:
            raise CoreMLOptionsError(f"shapes for input '{name}' are given twice; list them once.")
        if len(shapes) < 2:
            raise CoreMLOptionsError(f"input '{name}' needs at least two shapes to enumerate, got {len(shapes)}.")
        if len({len(s) for s in shapes}) != 1 or any(d <= 0 for s in shapes for d in s):
            raise CoreMLOptionsError(f"the shapes of input '{name}' must have the same rank and positive sizes.")
        result[name] = shapes
    if not result:
        raise CoreMLOptionsError("no shapes given: write NAME=1x3x32x32,1x3x64x64.")
    return result


def _input_names(module: Any, count: int) -> list[str]:
    parameters = list(inspect.signature(module.forward).parameters)
    return parameters[:count]


def export_with_shapes(module: Any, example_inputs: tuple[Any, ...], shapes: Mapping[str, Sequence[Sequence[int]]]) -> Any:
    """``torch.export.export`` with a ``Dim`` for every dimension that differs between an input's shapes."""
    import torch

    names = _input_names(module, len(example_inputs))
    unknown = [n for n in shapes if n not in names]
    if unknown:
        raise CoreMLOptionsError(f"shapes given for '{unknown[0]}', which is not an input; the inputs are: {', '.join(names)}.")
    dynamic: dict[str, dict[int, Any] | None] = {}
    for name, example in zip(names, example_inputs, strict=True):
        listed = [tuple(s) for s in shapes.get(name, ())]
        if not listed:
            dynamic[name] = None
            continue
        if tuple(example.shape) not in listed:
            raise CoreMLOptionsError(
                f"input '{name}': the example input's shape {list(example.shape)} must be one of the shapes "
                f"{[list(s) for s in listed]}."
            )
        if len(listed[0]) != example.dim():
            raise CoreMLOptionsError(f"input '{name}' has rank {example.dim()}, the shapes have rank {len(listed[0])}.")
        dims: dict[int, Any] = {}
        for axis in range(example.dim()):
            sizes = {s[axis] for s in listed}
            if len(sizes) > 1:
                dims[axis] = torch.export.Dim(f"{name}_dim{axis}", min=min(sizes), max=max(sizes))
        dynamic[name] = dims or None
    try:
        return torch.export.export(module, example_inputs, dynamic_shapes=dynamic)
    except Exception as error:  # torch raises UserError / ConstraintViolationError
        first = str(error).strip().splitlines()[0] if str(error).strip() else type(error).__name__
        raise CoreMLOptionsError(f"the model cannot be exported with these shapes: {first}") from None
