"""debug_coreml: per-layer numerics of a Core ML int8 lowering, checked where Core ML cannot run.

Core ML has no runtime on Linux, so each layer of the quantized torch program (the int8
program Core ML receives) is compared with float eager, and each layer's weight as decoded from
the converted Core ML model with the float weight (BatchNorm folded in where one follows).
"""

from __future__ import annotations

import copy
import dataclasses
import sys
from collections.abc import Sequence
from typing import Any

import numpy as np
import torch
from torch.export import ExportedProgram

from lowerkit.coreml_preprocess.errors import CoreMLLoweringError
from lowerkit.coreml_preprocess.lowering import lower_to_coreml
from lowerkit.coreml_preprocess.quantize import quantize_static_int8
from lowerkit.pass_infra.helpers.inputs import example_input_tuple
from lowerkit.pass_infra.numerics import programs
from lowerkit.pass_infra.numerics.advise import advise_keep_float
from lowerkit.pass_infra.numerics.keep_float import DEFAULT_TARGET_DB
from lowerkit.pass_infra.numerics.metrics import tensor_error
from lowerkit.pass_infra.numerics.points import QuantPoint, shown_inputs
from lowerkit.pass_infra.numerics.programs import FLOAT_VS_QUANTIZED
from lowerkit.pass_infra.numerics.ranges import channel_axis, range_diagnostic
from lowerkit.pass_infra.numerics.report import DebugReport, LayerNumerics
from lowerkit.pass_infra.numerics.sqnr import sqnr_db
from lowerkit.pass_infra.numerics.values import (
    DEQUANTIZE_OPS,
    counterparts,
    is_op,
    node_values,
    outputs_on,
)

__all__ = ["COREML_NOT_EXECUTED", "NoQuantizedLayerError", "debug_coreml", "debug_coreml_weights"]

COREML_NOT_EXECUTED = (
    "Core ML itself was not executed (no Core ML runtime on Linux): layers are compared in the "
    "quantized torch program Core ML receives, weights as decoded from the Core ML model"
)
WEIGHTS_NOT_EXECUTED = (
    "Core ML itself was not executed (no Core ML runtime on Linux): weights are decoded from the "
    "Core ML model, and the output is the float model with them, in torch"
)
#: Eval-mode batch norm ops, and the index of their `eps` argument.
_BATCH_NORM_EPS_ARG = {"batch_norm": 7, "_native_batch_norm_legit_no_training": 6}


class NoQuantizedLayerError(CoreMLLoweringError, programs.NoQuantizedLayerError):
    """The model has no layer the int8 quantizer quantizes."""


def debug_coreml(
    model: Any,
    example_inputs: tuple[Any, ...],
    *,
    calibration: Sequence[Sequence[Any]] | None = None,
    keep_float: Sequence[str] = (),
    threshold_db: float = 20.0,
    scan: int = 5,
    model_name: str = "model",
    target_sqnr_db: float = DEFAULT_TARGET_DB,
    search: int = 6,
) -> DebugReport:
    """Compare every quantized layer of a Core ML int8 lowering with float; see the module docstring.

    Flags ranges a few channels set (offset, wide or heavy-tailed channels), finds the first
    layer under `threshold_db`, charges the error a data-movement op shows to the layer whose
    quantization made it and, for the `scan` layers most to blame, measures the output gain of
    keeping each in float; with `search` > 0 more trials look for the smallest keep-float set
    that brings the output to `target_sqnr_db` (``report.keep_float_advice``).
    """
    inputs = example_input_tuple(example_inputs, CoreMLLoweringError)
    samples = [tuple(s) for s in calibration] if calibration is not None else [inputs]
    float_program = programs.float_program(model, inputs)
    lowering = lower_to_coreml(model, inputs, "int8", calibration=samples, keep_float=keep_float)
    quantized = lowering.reference
    assert isinstance(quantized, torch.fx.GraphModule)
    points = programs.quantized_layers(
        quantized, NoQuantizedLayerError, model_name=model_name, quantizer="int8", fix="lower it with a float recipe"
    )
    float_graph = float_program.module()
    float_values = node_values(float_graph, inputs)
    quantized_values = node_values(quantized, inputs)
    decoded = [w for weights in lowering.decoded_weights for w in weights.values()]
    keepable = programs.module_names(model)
    nodes = {n.name: n for n in float_graph.graph.nodes}
    quantized_nodes = {n.name: n for n in quantized.graph.nodes}
    float_names = counterparts(float_graph.graph, quantized.graph)
    layers = []
    for index, point in enumerate(points):
        reference = float_values.get(float_names.get(point.node, ""))
        value = quantized_values.get(point.quantize)
        if reference is None or value is None or reference.shape != value.shape:
            continue
        dequantized = (value.double() - point.zero_point) * point.scale
        error = tensor_error(reference, dequantized, point.scale)
        weight = _weight_sqnr(point, nodes, quantized_nodes, float_values, quantized_values, decoded)
        layers.append(
            LayerNumerics(
                name=point.name, op=point.op, index=index, error=error, stages={FLOAT_VS_QUANTIZED: error},
                scale=point.scale, inputs=point.inputs,
                range=range_diagnostic(reference, point.scale, channel_axis(point.op, reference.dim()), point.levels),
                weight_sqnr_db=weight, keepable=point.module in keepable,
            )
        )
    upstream = shown_inputs(points, {x.name for x in layers})
    layers = [dataclasses.replace(x, inputs=upstream[x.name]) for x in layers]
    notes = [COREML_NOT_EXECUTED]
    if len(layers) < len(points):
        notes.append(
            f"{len(points) - len(layers)} quantized tensor(s) have no counterpart in the float program "
            "(ops the quantizer's decompositions made) and are not shown"
        )
    if sys.platform == "darwin":
        notes.append("on macOS Core ML could run this model; lowerkit debug does not run it yet")
    batches = [inputs, *samples] if calibration is not None else [inputs]
    reference_outputs = outputs_on(float_graph, batches)
    report = DebugReport(
        model=model_name,
        target="coreml-int8",
        compared="per layer: float eager vs the quantized torch program (int8 static), on the example inputs "
        "(output SQNR and the sensitivity scan: on the example and calibration inputs); "
        "weights: decoded Core ML weights vs float",
        layers=layers,
        output_sqnr_db=sqnr_db(reference_outputs, outputs_on(quantized, batches)),
        threshold_kind="db",
        threshold=threshold_db,
        notes=notes,
    )

    def evaluate(names: tuple[str, ...]) -> float:
        converted = quantize_static_int8(float_program, samples, (*keep_float, *names))
        return sqnr_db(reference_outputs, outputs_on(converted, batches))

    advise_keep_float(report, evaluate, scan=scan, search=search, target_db=target_sqnr_db)
    return report


def _weight_sqnr(
    point: QuantPoint,
    float_nodes: dict[str, torch.fx.Node],
    quantized_nodes: dict[str, torch.fx.Node],
    float_values: dict[str, torch.Tensor],
    quantized_values: dict[str, torch.Tensor],
    decoded: list[np.ndarray],
) -> float | None:
    """SQNR of the layer's decoded Core ML weight against its float weight (BatchNorm folded)."""
    first = quantized_nodes.get(point.group[0])
    if first is None or len(first.args) < 2 or not is_op(first.args[1], DEQUANTIZE_OPS):
        return None
    torch_weight = quantized_values.get(first.args[1].name)
    float_op = float_nodes.get(point.group[0])
    if torch_weight is None or float_op is None or len(float_op.args) < 2:
        return None
    float_weight = _folded_weight(float_op, float_values)
    if float_weight is None or float_weight.shape != torch_weight.shape:
        return None
    same_shape = [w for w in decoded if tuple(w.shape) == tuple(torch_weight.shape)]
    if not same_shape:
        return None
    # The decoded weight that is this layer's: the one closest to torch's dequantized weight.
    mine = max(same_shape, key=lambda w: sqnr_db(torch_weight, w))
    return sqnr_db(float_weight, mine)


def _folded_weight(op: torch.fx.Node, values: dict[str, torch.Tensor]) -> torch.Tensor | None:
    weight = values.get(getattr(op.args[1], "name", ""))
    if weight is None:
        return None
    users = list(op.users)
    eps_arg = _BATCH_NORM_EPS_ARG.get(getattr(users[0].target, "__name__", "").split(".")[0]) if len(users) == 1 else None
    if eps_arg is None:
        return weight
    from torch.nn.utils.fusion import fuse_conv_bn_weights

    norm = users[0]
    gamma, beta, mean, var = (values.get(getattr(a, "name", "")) for a in norm.args[1:5])
    if mean is None or var is None:
        return weight
    bias = values.get(getattr(op.args[2], "name", "")) if len(op.args) > 2 else None
    folded, _ = fuse_conv_bn_weights(weight, bias, mean, var, float(norm.args[eps_arg]), gamma, beta)
    return folded.detach()


#: Weight-only recipes: the first layer whose decoded weight is under this SQNR (dB).
WEIGHT_THRESHOLD_DB = 20.0


def debug_coreml_weights(
    model: Any, example_inputs: tuple[Any, ...], recipe: str, *, model_name: str = "model"
) -> DebugReport:
    """Weight-only recipes (w8, w4, palettize4): each compressed weight, decoded from the Core ML
    model, against its float weight; the output with the decoded weights put back into the float
    model (in torch) against float."""
    inputs = example_input_tuple(example_inputs, CoreMLLoweringError)
    eager = model.module() if isinstance(model, ExportedProgram) else model
    lowering = lower_to_coreml(model, inputs, recipe)
    decoded = [w for weights in lowering.decoded_weights for w in weights.values()]
    parameters = {name: p.detach() for name, p in eager.named_parameters() if p.dim() >= 2}
    if not decoded:
        raise NoQuantizedLayerError(
            f"{model_name}: {recipe} compressed no weight (none is large enough), so it loses nothing here"
        )
    order = {name: i for i, name in enumerate(parameters)}
    matched: dict[str, np.ndarray] = {}
    for weight in decoded:
        same = [n for n, p in parameters.items() if p.numel() == weight.size and n not in matched]
        if same:
            best = max(same, key=lambda n: sqnr_db(parameters[n].reshape(-1), weight.reshape(-1)))
            matched[best] = weight.reshape(parameters[best].shape)
    layers = []
    for name in sorted(matched, key=order.__getitem__):
        error = tensor_error(parameters[name], matched[name])
        module = name.rsplit(".", 1)[0]
        layers.append(
            LayerNumerics(
                name=module, op="weight", index=order[name], error=error, stages={"decoded weight vs float": error},
                weight_sqnr_db=error.sqnr_db,
            )
        )
    substituted = copy.deepcopy(eager)
    with torch.no_grad():
        for name, weight in matched.items():
            substituted.get_parameter(name).copy_(torch.from_numpy(np.asarray(weight, np.float32)))
    reference = outputs_on(eager, [inputs])
    notes = [WEIGHTS_NOT_EXECUTED]
    unmatched = len(decoded) - len(matched)
    if unmatched:
        notes.append(f"{unmatched} decoded weight(s) match no float parameter by size (e.g. BatchNorm folded in)")
    return DebugReport(
        model=model_name,
        target=f"coreml-{recipe}",
        compared="per layer: the weight decoded from the Core ML model vs the float weight; output: the float "
        "model with the decoded weights put back, in torch, vs float, on the example inputs",
        layers=layers,
        output_sqnr_db=sqnr_db(reference, outputs_on(substituted, [inputs])),
        threshold_kind="db",
        threshold=WEIGHT_THRESHOLD_DB,
        notes=notes,
    )
