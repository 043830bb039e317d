"""Core ML --verify: quantization SQNR in torch and decoded-weight SQNR (Core ML itself cannot run on Linux)."""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import torch

from lowerkit.cli.backends.coreml.targets import COREML_CANNOT_RUN
from lowerkit.cli.result import Lowered
from lowerkit.cli.sources.model import Inputs, ModelSource
from lowerkit.pass_infra.numerics.sqnr import sqnr_db


def _outputs(module: Any, inputs: Inputs) -> list[np.ndarray]:
    with torch.no_grad():
        result = module(*inputs)
    tensors = result if isinstance(result, list | tuple) else [result]
    return [t.detach().float().numpy() for t in tensors]


def verify_coreml(lowered: Lowered, source: ModelSource) -> dict[str, Any]:
    """Quantization SQNR against float in torch, and decoded-weight SQNR, for a Core ML program.

    `lowered.reference` is the CoreMLLowering: its torch reference (int8, palettize4) and the
    weights decoded from the MLModels preprocess converted.
    """
    lowering = lowered.reference
    result: dict[str, Any] = {"note": COREML_CANNOT_RUN}
    float_outputs = _outputs(source.eager(), source.example_inputs)
    if lowering.reference is not None:
        quantized = _outputs(lowering.reference, source.example_inputs)
        result["output_sqnr_db"] = min(
            sqnr_db(f, q) for f, q in zip(float_outputs, quantized, strict=True)
        )
        result["compared"] = "quantized program in torch vs float eager, on the example inputs"
    weights = [w for decoded in lowering.decoded_weights for w in decoded.values()]
    if weights:
        parameters = [p.detach().numpy() for p in source.eager().parameters()]
        parameters += _batch_norm_folded_weights(source.export())
        result["weight_sqnr_db"] = min(_best_match(w, parameters) for w in weights)
        result["decoded_weights"] = len(weights)
    return result


#: Eval-mode batch norm ops in an exported program, and the index of their `eps` argument.
_BATCH_NORM_EPS_ARG = {"batch_norm": 7, "_native_batch_norm_legit_no_training": 6}


def _batch_norm_folded_weights(exported: torch.export.ExportedProgram) -> list[np.ndarray]:
    """Convolution weights with the BatchNorm that follows folded in, as Core ML stores them."""
    from torch.nn.utils.fusion import fuse_conv_bn_weights

    signature = exported.graph_signature
    names = {**signature.inputs_to_parameters, **signature.inputs_to_buffers}
    tensors = {**exported.state_dict, **exported.constants}

    def tensor(node: Any) -> torch.Tensor | None:
        return tensors.get(names.get(getattr(node, "name", ""), ""))

    folded = []
    for node in exported.graph.nodes:
        eps_arg = _BATCH_NORM_EPS_ARG.get(getattr(node.target, "__name__", "").split(".")[0])
        if node.op != "call_function" or eps_arg is None:
            continue
        conv = node.args[0]
        if getattr(conv, "target", None) is not torch.ops.aten.conv2d.default or len(conv.users) != 1:
            continue
        weight, bias = tensor(conv.args[1]), tensor(conv.args[2]) if len(conv.args) > 2 else None
        gamma, beta, mean, var = (tensor(arg) for arg in node.args[1:5])
        if weight is None or mean is None or var is None:
            continue
        fused, _ = fuse_conv_bn_weights(weight, bias, mean, var, float(node.args[eps_arg]), gamma, beta)
        folded.append(fused.detach().numpy())
    return folded


def _best_match(weight: np.ndarray, parameters: list[np.ndarray]) -> float:
    """SQNR of a decoded weight against the float parameter of the same shape it matches best."""
    candidates = [p for p in parameters if p.size == weight.size]
    if not candidates:
        return math.nan
    return max(sqnr_db(p.reshape(-1), weight.reshape(-1)) for p in candidates)
