"""What both backends' `debug` functions start from: the float program, the stage it is compared
in, the module names keep-float may take, and the error raised when the quantizer quantized no
layer (so there is nothing to debug).

Each backend subclasses `NoQuantizedLayerError` together with its own lowering error
(``arm_passes.numerics.debug.NoQuantizedLayerError``,
``coreml_preprocess.numerics.NoQuantizedLayerError``), so either class catches it.
"""

from __future__ import annotations

from typing import Any

import torch
from torch.export import ExportedProgram

from lowerkit.pass_infra.numerics.points import QuantPoint, quant_points

__all__ = ["FLOAT_VS_QUANTIZED", "NoQuantizedLayerError", "float_program", "module_names", "quantized_layers"]

#: The stage label of a layer's quantized torch output compared with its float output.
FLOAT_VS_QUANTIZED = "quantized vs float"


class NoQuantizedLayerError(ValueError):
    """The model has no layer the quantizer quantizes (or no weight a recipe compresses): there
    is nothing for quantization to lose, so nothing to debug; the message says how to lower it."""


def float_program(model: Any, inputs: tuple[Any, ...]) -> ExportedProgram:
    """`model` as an ExportedProgram: itself if it is one, else exported on `inputs`."""
    return model if isinstance(model, ExportedProgram) else torch.export.export(model, inputs)


def module_names(model: Any) -> set[str]:
    """The names of `model`'s submodules (an ExportedProgram's, unflattened): what keep-float may name."""
    module = model.module() if isinstance(model, ExportedProgram) else model
    return {name for name, _ in module.named_modules() if name}


def quantized_layers(
    quantized: torch.fx.GraphModule, error: type[NoQuantizedLayerError], *, model_name: str, quantizer: str, fix: str
) -> list[QuantPoint]:
    """The quantized layers of `quantized` (``points.quant_points``); with none, `error`: "{model_name}
    has no layer the {quantizer} quantizer quantizes, so int8 loses nothing here; nothing to debug ({fix})"."""
    points = quant_points(quantized.graph)
    if not points:
        raise error(
            f"{model_name} has no layer the {quantizer} quantizer quantizes, so int8 loses nothing here; "
            f"nothing to debug ({fix})"
        )
    return points
