"""The torch-side steps of the ``int8`` and ``palettize4`` recipes (before export to edge)."""

from __future__ import annotations

import copy
from collections.abc import Sequence
from typing import Any

import torch
from torch.export import ExportedProgram

from lowerkit.coreml_preprocess.errors import CoreMLLoweringError

__all__ = ["PALETTE_GROUP", "palettize4", "quantize_static_int8"]

#: Input columns that share one 4-bit lookup table, where a linear layer's width allows it.
PALETTE_GROUP = 16


def quantize_static_int8(
    program: ExportedProgram, calibration: Sequence[tuple[Any, ...]], keep_float: Sequence[str] = ()
) -> torch.fx.GraphModule:
    """pt2e int8 (symmetric, per-channel weights) with lowerkit's CoreMLQuantizer: the converted module.

    The modules named in `keep_float` (e.g. "features.3") are left in float.
    """
    from torchao.quantization.pt2e.quantize_pt2e import convert_pt2e, prepare_pt2e

    from lowerkit.coreml_quantizer.int8_config import static_int8_config
    from lowerkit.coreml_quantizer.quantizer import CoreMLQuantizer

    prepared = prepare_pt2e(program.module(), CoreMLQuantizer(static_int8_config(keep_float)))
    try:
        with torch.no_grad():
            for batch in calibration:
                prepared(*batch)
    except AssertionError:  # torchao's observers assert on the ranges they compute
        _check_finite_ranges(prepared)
        raise
    _check_finite_ranges(prepared)
    return convert_pt2e(prepared)


def _check_finite_ranges(prepared: torch.fx.GraphModule) -> None:
    """Fail clearly when calibration saw ±inf or NaN where int8 needs a finite range."""
    for node in prepared.graph.nodes:
        observer = getattr(prepared, str(node.target), None) if node.op == "call_module" else None
        # A fake-quantize module wraps the observer that holds the range.
        observer = getattr(observer, "activation_post_process", observer)
        low, high = getattr(observer, "min_val", None), getattr(observer, "max_val", None)
        if not isinstance(low, torch.Tensor) or not isinstance(high, torch.Tensor) or low.numel() == 0:
            continue
        if bool(torch.isfinite(low).all()) and bool(torch.isfinite(high).all()):
            continue
        observed = node.args[0] if node.args else node
        raise CoreMLLoweringError(
            f"calibration saw a non-finite value in `{observed}` (min {float(low.min())}, max {float(high.max())}), "
            "which int8 cannot represent; use a finite mask (e.g. masked_fill before softmax instead of adding "
            "-inf) or a weight-only recipe (w8, w4)"
        )


def palettize4(module: torch.nn.Module) -> tuple[torch.nn.Module, int]:
    """A copy with every linear layer palettized to 4 bits, a table per 16 input columns (else per weight).

    Returns the palettized module and how many linear layers it has.
    """
    from torchao.prototype.quantization.codebook_coreml import CodebookWeightOnlyConfig
    from torchao.quantization import quantize_

    def grouped(layer: torch.nn.Module, _fqn: str) -> bool:
        return isinstance(layer, torch.nn.Linear) and layer.in_features % PALETTE_GROUP == 0

    def ungrouped(layer: torch.nn.Module, _fqn: str) -> bool:
        return isinstance(layer, torch.nn.Linear) and layer.in_features % PALETTE_GROUP != 0

    palettized = copy.deepcopy(module)
    count = sum(1 for layer in palettized.modules() if isinstance(layer, torch.nn.Linear))
    quantize_(palettized, CodebookWeightOnlyConfig(dtype=torch.uint4, block_size=[-1, PALETTE_GROUP]), grouped)
    quantize_(palettized, CodebookWeightOnlyConfig(dtype=torch.uint4, block_size=[-1, -1]), ungrouped)
    return palettized, count
