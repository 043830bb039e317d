"""debug_arm: per-layer numerics of an Arm INT lowering, where the error starts and what fixes it."""

from __future__ import annotations

import dataclasses
import time
from collections import Counter
from collections.abc import Sequence
from typing import Any

import numpy as np
import torch

from lowerkit.arm_passes import _upstream
from lowerkit.arm_passes.devices import compile_spec_for, is_integer
from lowerkit.arm_passes.errors import ArmLoweringError
from lowerkit.arm_passes.lowering import ArmLowering, fake_quantize, lower_to_arm
from lowerkit.arm_passes.numerics.bisect import PassBisection, bisect_recorded, quantized_feeds
from lowerkit.arm_passes.numerics.pass_states import PassState, record_pass_states
from lowerkit.arm_passes.numerics.tosa_tensors import (
    TosaTensor,
    drop_reordered,
    read_intermediates,
    tosa_tensors,
)
from lowerkit.arm_passes.reference import run_tosa_reference, verify_on_reference_model
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
    counterparts,
    layer_name,
    module_path,
    node_values,
    op_label,
    outputs_on,
)

__all__ = ["NoQuantizedLayerError", "debug_arm", "debug_arm_float", "keep_float_gain", "quantized_program"]

TOSA_VS_QUANTIZED = "TOSA vs quantized"
TOSA_VS_FLOAT = "TOSA vs float"


class NoQuantizedLayerError(ArmLoweringError, programs.NoQuantizedLayerError):
    """The model has no layer the quantizer quantizes: there is nothing for int8 to lose."""


def quantized_program(
    model: Any,
    example_inputs: tuple[Any, ...],
    target: str,
    *,
    calibration: Sequence[Sequence[Any]] | None = None,
    keep_float: Sequence[str] = (),
) -> torch.fx.GraphModule:
    """The fake-quantized torch module lower_to_arm would export and lower (no lowering)."""
    inputs = example_input_tuple(example_inputs, ArmLoweringError)
    program = programs.float_program(model, inputs)
    return fake_quantize(program, inputs, compile_spec_for(target), calibration, keep_float=keep_float)


def _batches(inputs: tuple[Any, ...], calibration: Sequence[Sequence[Any]] | None) -> list[tuple[Any, ...]]:
    """Where output SQNR is measured: the example inputs and the calibration batches."""
    return [inputs, *(tuple(b) for b in calibration or [])]


def keep_float_gain(
    model: Any,
    example_inputs: tuple[Any, ...],
    target: str,
    names: Sequence[str],
    *,
    calibration: Sequence[Sequence[Any]] | None = None,
) -> tuple[float, float]:
    """Output SQNR (dB) against float of the quantized program, without and with `names` in float."""
    inputs = example_input_tuple(example_inputs, ArmLoweringError)
    batches = _batches(inputs, calibration)
    reference = outputs_on(programs.float_program(model, inputs), batches)
    plain = outputs_on(quantized_program(model, inputs, target, calibration=calibration), batches)
    kept = outputs_on(quantized_program(model, inputs, target, calibration=calibration, keep_float=names), batches)
    return sqnr_db(reference, plain), sqnr_db(reference, kept)


def _tosa_for(point: QuantPoint, tensors: list[TosaTensor], numel: int, dtype: torch.dtype = torch.int8) -> TosaTensor | None:
    group = set(point.group)
    found = [t for t in tensors if t.dtype == dtype and t.sources & group and int(np.prod(t.shape)) == numel]
    return found[-1] if found else None


def debug_arm(
    model: Any,
    example_inputs: tuple[Any, ...],
    target: str = "TOSA-1.0+INT",
    *,
    calibration: Sequence[Sequence[Any]] | None = None,
    keep_float: Sequence[str] = (),
    threshold_quanta: float = 1.0,
    scan: int = 5,
    model_name: str = "model",
    bisect: bool | None = None,
    target_sqnr_db: float = DEFAULT_TARGET_DB,
    search: int = 6,
) -> DebugReport:
    """Compare every quantized layer along an Arm INT lowering: float eager, the fake-quantized
    torch program, and the TOSA reference model's intermediate tensors of the lowered flatbuffer.

    Then flag ranges a few channels set (offset, wide or heavy-tailed channels), find where the
    error first exceeds `threshold_quanta` (in each layer's output quanta), charge the error a
    data-movement op shows to the layer whose quantization made it, and, for the `scan` layers
    most to blame, measure the output gain of keeping each in float (in the quantized torch
    program); with `search` > 0 more trials look for the smallest keep-float set that brings the
    output to `target_sqnr_db` (``report.keep_float_advice``).
    Where the TOSA graph and the fake-quant program disagree by more than `threshold_quanta`
    (or with `bisect=True`; never with False), the Arm pass pipeline is bisected
    (``report.bisection``: the first pass after which the outputs differ).
    """
    inputs = example_input_tuple(example_inputs, ArmLoweringError)
    if not is_integer(target):
        report = debug_arm_float(model, inputs, target, model_name=model_name)
        if bisect:
            report.notes.append("pass bisection not run: it compares integer outputs in quanta (INT targets only)")
        return report
    seconds: dict[str, float] = {}
    start = time.perf_counter()
    float_program = programs.float_program(model, inputs)
    captured: list[tuple[bytes, torch.fx.GraphModule]] = []
    states: list[PassState] = []  # the graph after every pass, for a bisection (copies: the lowering is unchanged)
    with _upstream.capture_tosa_graphs(captured), record_pass_states(states):
        lowering = lower_to_arm(model, inputs, target, calibration=calibration, keep_float=keep_float)
    assert lowering.source_program is not None
    seconds["lower"] = time.perf_counter() - start
    quantized = lowering.source_program.module()
    points = programs.quantized_layers(
        quantized, NoQuantizedLayerError, model_name=model_name, quantizer="Arm",
        fix="lower it to TOSA-1.0+FP to keep it float",
    )  # fmt: skip
    float_module = float_program.module()
    float_names = counterparts(float_module.graph, quantized.graph)
    recorded = node_values(float_module, inputs)
    float_values = {mine: recorded[theirs] for mine, theirs in float_names.items() if theirs in recorded}
    quantized_values = node_values(quantized, inputs)
    notes: list[str] = []
    summary: dict[str, Any] = {"seconds": seconds}
    start = time.perf_counter()
    tosa_values = _tosa_values(lowering, captured, points, quantized_values, inputs, notes, summary)
    seconds["tosa reference model"] = time.perf_counter() - start
    keepable = programs.module_names(model)
    layers = []
    for index, point in enumerate(points):
        layer = _layer(index, point, float_values, quantized_values, tosa_values, keepable)
        if layer is not None:
            layers.append(layer)
    upstream = shown_inputs(points, {x.name for x in layers})
    layers = [dataclasses.replace(x, inputs=upstream[x.name]) for x in layers]
    skipped = len(points) - len(layers)
    if skipped:
        notes.append(
            f"{skipped} quantized tensor(s) have no counterpart in the float program (ops the quantizer's "
            "decompositions made, e.g. of LayerNorm) and are not shown"
        )
    missing = sum(1 for x in layers if TOSA_VS_QUANTIZED not in x.stages)
    if tosa_values and missing:
        notes.append(f"{missing} layer(s) have no TOSA tensor of their own (fused away) and show no TOSA value")
    report = DebugReport(
        model=model_name,
        target=target,
        compared=(
            "per layer: float eager, the fake-quantized torch program, and the TOSA reference "
            "model's intermediate tensors of the lowered flatbuffer, on the example inputs "
            "(output SQNR and the sensitivity scan: on the example and calibration inputs)"
        ),
        layers=layers,
        output_sqnr_db=sqnr_db(
            outputs_on(float_program, _batches(inputs, calibration)),
            outputs_on(lowering.source_program, _batches(inputs, calibration)),
        ),
        threshold_kind="quanta",
        threshold=threshold_quanta,
        threshold_stage=TOSA_VS_QUANTIZED if tosa_values else FLOAT_VS_QUANTIZED,
        notes=notes,
        summary=summary,
    )
    if tosa_values:
        check = verify_on_reference_model(lowering, inputs)
        summary["tosa_vs_quantized_output"] = {"sqnr_db": check.sqnr_db, "max_error_quanta": check.max_error_quanta}
        disagree = (check.max_error_quanta or 0.0) > threshold_quanta or report.first_over_threshold is not None
        if bisect or (bisect is None and disagree):
            start = time.perf_counter()
            report.bisection = _bisect(states, lowering, inputs, threshold_quanta, notes)
            seconds["pass bisection"] = time.perf_counter() - start
    elif bisect:
        notes.append("pass bisection not run: it needs one fully delegated partition, as the TOSA comparison does")
    states.clear()  # the graph copies are not needed past here
    start = time.perf_counter()
    batches = _batches(inputs, calibration)
    reference = outputs_on(float_program, batches)

    def evaluate(names: tuple[str, ...]) -> float:
        program = quantized_program(float_program, inputs, target, calibration=calibration, keep_float=(*keep_float, *names))
        return sqnr_db(reference, outputs_on(program, batches))

    advise_keep_float(report, evaluate, scan=scan, search=search, target_db=target_sqnr_db)
    seconds["keep-float search" if report.keep_float_advice is not None else "sensitivity scan"] = time.perf_counter() - start
    summary["seconds"] = {k: round(v, 1) for k, v in seconds.items()}
    return report


def _bisect(
    states: list[PassState], lowering: ArmLowering, inputs: tuple[Any, ...], threshold_quanta: float, notes: list[str]
) -> PassBisection | None:
    try:
        return bisect_recorded(states, lowering, inputs, threshold_quanta=threshold_quanta)
    except ArmLoweringError as error:
        notes.append(f"pass bisection not run: {error}")
        return None


def _tosa_values(
    lowering: ArmLowering,
    captured: list[tuple[bytes, torch.fx.GraphModule]],
    points: list[QuantPoint],
    quantized_values: dict[str, torch.Tensor],
    inputs: tuple[Any, ...],
    notes: list[str],
    summary: dict[str, Any],
) -> dict[str, np.ndarray]:
    """Each point's TOSA int8 tensor, dequantized, in torch's layout (by the point's quantize node)."""
    if len(captured) != 1 or lowering.cpu_ops or len(lowering.input_qparams) != len(inputs):
        notes.append(
            "the TOSA reference model was not run: its intermediates need one fully delegated "
            f"partition (this lowering has {len(captured)}, CPU ops {list(lowering.cpu_ops)})"
        )
        return {}
    flatbuffer, graph = captured[0]
    tensors = tosa_tensors(graph)
    chosen = {}
    for point in points:
        value = quantized_values.get(point.quantize)
        tensor = _tosa_for(point, tensors, value.numel(), value.dtype) if value is not None else None
        if tensor is not None:
            chosen[point.quantize] = tensor
    by_name = {p.name: p.quantize for p in points}
    point_inputs = {p.quantize: [by_name[n] for n in p.inputs if n in by_name] for p in points}
    reordered = drop_reordered(chosen, point_inputs, tensors)
    if reordered:
        notes.append(f"{len(reordered)} layer(s) not compared with TOSA: the pipeline moved an op past them")
    feeds = [x.numpy() for x in quantized_feeds(lowering, inputs)]
    raw = read_intermediates(flatbuffer, feeds, sorted({t.name for t in chosen.values()}))
    shipped = run_tosa_reference(flatbuffer, feeds)
    same = len(shipped) == len(raw[""]) and all(np.array_equal(a, b) for a, b in zip(shipped, raw[""], strict=True))
    if not same:
        notes.append("the flatbuffer re-serialized with intermediate outputs computes other outputs than the shipped one")
    summary["tosa_intermediates_same_outputs"] = same
    values = {}
    for point in points:
        tensor = chosen.get(point.quantize)
        if tensor is None:
            continue
        shape = tuple(quantized_values[point.quantize].shape)
        array = tensor.to_torch_layout(raw[tensor.name], shape, like=quantized_values[point.quantize].numpy())
        if array is not None:
            values[point.quantize] = (array.astype(np.float64) - point.zero_point) * point.scale
    return values


def _layer(
    index: int,
    point: QuantPoint,
    float_values: dict[str, torch.Tensor],
    quantized_values: dict[str, torch.Tensor],
    tosa_values: dict[str, np.ndarray],
    keepable: set[str],
) -> LayerNumerics | None:
    reference = float_values.get(point.node)
    quantized_int = quantized_values.get(point.quantize)
    if reference is None or quantized_int is None or reference.shape != quantized_int.shape:
        return None
    quantized = (quantized_int.double() - point.zero_point) * point.scale
    stages = {FLOAT_VS_QUANTIZED: tensor_error(reference, quantized, point.scale)}
    device = tosa_values.get(point.quantize)
    if device is not None:
        stages[TOSA_VS_QUANTIZED] = tensor_error(quantized, device, point.scale)
        stages[TOSA_VS_FLOAT] = tensor_error(reference, device, point.scale)
    return LayerNumerics(
        name=point.name,
        op=point.op,
        index=index,
        error=stages.get(TOSA_VS_FLOAT, stages[FLOAT_VS_QUANTIZED]),
        stages=stages,
        scale=point.scale,
        inputs=point.inputs,
        range=range_diagnostic(reference, point.scale, channel_axis(point.op, reference.dim()), point.levels),
        keepable=point.module in keepable,
    )


#: TOSA FP: the first layer under this SQNR (dB) against eager is where the error starts.
FLOAT_THRESHOLD_DB = 80.0


def debug_arm_float(
    model: Any, example_inputs: tuple[Any, ...], target: str = "TOSA-1.0+FP", *, model_name: str = "model"
) -> DebugReport:
    """TOSA FP: every op's output in eager against the reference model's intermediate tensor."""
    inputs = example_input_tuple(example_inputs, ArmLoweringError)
    captured: list[tuple[bytes, torch.fx.GraphModule]] = []
    with _upstream.capture_tosa_graphs(captured):
        lowering = lower_to_arm(model, inputs, target, quantize=False)
    if len(captured) != 1 or lowering.cpu_ops or lowering.source_program is None:
        raise ArmLoweringError(
            f"the TOSA reference model's intermediates need one fully delegated partition; this lowering has "
            f"{len(captured)}, CPU ops {list(lowering.cpu_ops)}"
        )
    module = lowering.source_program.module()
    values = node_values(module, inputs)
    flatbuffer, graph = captured[0]
    tensors = tosa_tensors(graph)
    chosen: dict[str, TosaTensor] = {}
    for node in module.graph.nodes:
        if node.op != "call_function" or node.name not in values:
            continue
        numel = values[node.name].numel()
        found = [t for t in tensors if t.dtype.is_floating_point and node.name in t.sources and int(np.prod(t.shape)) == numel]
        if found:
            chosen[node.name] = found[-1]
    reordered = drop_reordered(chosen, {n.name: [a.name for a in n.all_input_nodes] for n in module.graph.nodes}, tensors)
    raw = read_intermediates(flatbuffer, [x.detach().numpy() for x in inputs], sorted({t.name for t in chosen.values()}))
    nodes = [n for n in module.graph.nodes if n.name in chosen]
    counts = Counter(layer_name(n) for n in nodes)
    names = {n.name: layer_name(n) if counts[layer_name(n)] == 1 else f"{layer_name(n)}:{n.name}" for n in nodes}
    keepable = programs.module_names(model)
    layers = []
    for index, node in enumerate(nodes):
        tensor = chosen[node.name]
        device = tensor.to_torch_layout(raw[tensor.name], tuple(values[node.name].shape), like=values[node.name].numpy())
        if device is None:
            continue
        error = tensor_error(values[node.name], device)
        layers.append(
            LayerNumerics(
                name=names[node.name], op=op_label(node), index=index, error=error, stages={"TOSA vs eager": error},
                inputs=tuple(names[a.name] for a in node.all_input_nodes if a.name in names),
                keepable=module_path(node) in keepable,
            )
        )
    check = verify_on_reference_model(lowering, inputs)
    return DebugReport(
        model=model_name,
        target=target,
        compared="per op: the float program in torch vs the TOSA reference model's intermediate tensors, on the example inputs",
        layers=layers,
        output_sqnr_db=check.sqnr_db,
        threshold_kind="db",
        threshold=FLOAT_THRESHOLD_DB,
        notes=[
            f"{len(chosen)} of {sum(1 for n in module.graph.nodes if n.name in values and n.op == 'call_function')} "
            "ops have a TOSA tensor of their own (the others are fused, or views)"
            + (f"; not compared, as the pipeline moved an op past them: {', '.join(reordered)}" if reordered else "")
        ],
        summary={"tosa_vs_eager_output": {"sqnr_db": check.sqnr_db, "max_abs_error": check.max_abs_error}},
    )
