"""layout_transposes: where each transpose sits, on graphs built by hand (no lowering)."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

import torch
from executorch.exir.delegate import executorch_call_delegate
from torch.fx import Graph, GraphModule

from lowerkit.arm_passes.transposes import layout_transposes

_PERMUTE = torch.ops.aten.permute_copy.default
_QUANT = torch.ops.quantized_decomposed.quantize_per_tensor.default
_DEQUANT = torch.ops.quantized_decomposed.dequantize_per_tensor.default


def _program(graph: Graph, user_inputs: tuple[str, ...] = ()) -> Any:
    return SimpleNamespace(
        graph_module=GraphModule(torch.nn.Module(), graph),
        graph_signature=SimpleNamespace(user_inputs=list(user_inputs)),
    )


def test_cpu_permutes_next_to_the_delegate_or_between_cpu_ops() -> None:
    import operator

    graph = Graph()
    x = graph.placeholder("x")
    into = graph.call_function(_PERMUTE, (x, [0, 2, 3, 1]))  # feeds the delegate through its quantize
    quantized = graph.call_function(_QUANT, (into, 0.1, 0, -128, 127, torch.int8))
    call = graph.call_function(executorch_call_delegate, (None, quantized))
    item = graph.call_function(operator.getitem, (call, 0))
    dequantized = graph.call_function(_DEQUANT, (item, 0.1, 0, -128, 127, torch.int8))
    out_of = graph.call_function(_PERMUTE, (dequantized, [0, 3, 1, 2]))  # reads a delegate output
    between = graph.call_function(_PERMUTE, (out_of, [0, 1, 3, 2]))  # CPU op to CPU op
    graph.output((between, graph.call_function(torch.ops.aten.relu.default, (between,))))
    split = layout_transposes(_program(graph), [])
    assert split.cpu_boundary == (into.name, out_of.name)
    assert split.cpu_internal == (between.name,)
    assert split.delegate_boundary == split.delegate_internal == ()


def test_tosa_transposes_at_the_partition_inputs_outputs_or_inside() -> None:
    import executorch.backends.arm.tosa.dialect  # noqa: F401  (registers the TOSA dialect ops)
    from executorch.exir.dialects._ops import ops as exir_ops

    transpose = exir_ops.backend.tosa.TRANSPOSE.default
    graph = Graph()
    x = graph.placeholder("x")
    weight = graph.placeholder("weight")
    reads_input = graph.call_function(transpose, (x, [0, 2, 3, 1]))
    of_constant = graph.call_function(transpose, (weight, [1, 0]))  # a constant is no delegate input
    inside = graph.call_function(transpose, (reads_input, [0, 3, 1, 2]))
    writes_output = graph.call_function(transpose, (inside, [0, 2, 3, 1]))
    used = graph.call_function(torch.ops.aten.add.Tensor, (of_constant, of_constant))
    graph.output((writes_output, used, inside))
    split = layout_transposes(_program(Graph()), [_program(graph, user_inputs=("x",))])
    assert split.delegate_boundary == (reads_input.name, writes_output.name)
    assert split.delegate_internal == (of_constant.name, inside.name)
