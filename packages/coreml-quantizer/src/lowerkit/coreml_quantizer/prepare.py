"""``prepare_pt2e`` / ``prepare_qat_pt2e`` that reject a model that was not exported."""

from __future__ import annotations

from typing import Any

from torch.fx import GraphModule
from torchao.quantization.pt2e import quantize_pt2e
from torchao.quantization.pt2e.quantizer import Quantizer

from lowerkit.coreml_quantizer.exported import require_exported


def prepare_pt2e(model: Any, quantizer: Quantizer) -> GraphModule:
    """torchao's ``prepare_pt2e`` (observers for post-training quantization), after checking the model."""
    prepared: GraphModule = quantize_pt2e.prepare_pt2e(require_exported(model), quantizer)
    return prepared


def prepare_qat_pt2e(model: Any, quantizer: Quantizer) -> GraphModule:
    """torchao's ``prepare_qat_pt2e`` (fake quantization for training), after checking the model."""
    prepared: GraphModule = quantize_pt2e.prepare_qat_pt2e(require_exported(model), quantizer)
    return prepared
