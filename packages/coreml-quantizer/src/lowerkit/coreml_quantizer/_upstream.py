"""Every reach into a third party's private names, in one place.

A version bump of torch, torchao or coremltools means reading this file only.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch
from torch.fx import GraphModule, Node
from torchao.quantization.pt2e.quantizer.quantizer import (
    Q_ANNOTATION_KEY,
    QuantizationAnnotation,
)
from torchao.quantization.pt2e.utils import (
    _get_aten_graph_module_for_pattern,
)

#: The class of an aten op overload such as ``torch.ops.aten.relu.default``.
OpOverload: Any = torch._ops.OpOverload

#: ``torch._C._nn.avg_pool2d`` / ``avg_pool3d``: ExecuTorch's avg-pool annotators list them.
AVG_POOL2D_C: Callable[..., Any] = torch._C._nn.avg_pool2d
AVG_POOL3D_C: Callable[..., Any] = torch._C._nn.avg_pool3d


def trace_pattern_strict(
    pattern: torch.nn.Module, example_inputs: tuple[torch.Tensor, ...]
) -> GraphModule:
    """Trace a pattern exactly as ExecuTorch does: torchao's helper, a strict (dynamo) export."""
    graph_module: GraphModule = _get_aten_graph_module_for_pattern(pattern, example_inputs, False)
    return graph_module


def trace_pattern_non_strict(
    pattern: torch.nn.Module, example_inputs: tuple[torch.Tensor, ...]
) -> GraphModule:
    """Trace a pattern with a non-strict export, cleaned up as torchao's helper does.

    Same graph as `trace_pattern_strict` (checked for all of ExecuTorch's patterns by
    lowerkit's tests) without dynamo's cost: about a third of the time, and no
    second-long warm-up on the first call in a process.
    """
    graph_module: GraphModule = torch.export.export(pattern, example_inputs, strict=False).module()
    # A non-strict export adds a guard-checking submodule call; the strict one does not.
    for node in list(graph_module.graph.nodes):
        if node.op == "call_module" and node.name == "_guards_fn":
            graph_module.graph.erase_node(node)
            if hasattr(graph_module, "_guards_fn"):
                delattr(graph_module, "_guards_fn")
    graph_module.graph.eliminate_dead_code()
    graph_module.recompile()
    # ep.module() adds copy_ nodes for mutated inputs; patterns do not need them.
    for node in list(graph_module.graph.nodes):
        if (
            node.op == "call_function"
            and node.target == torch.ops.aten.copy_.default
            and len(node.users) == 0
        ):
            graph_module.graph.erase_node(node)
    graph_module.graph.eliminate_dead_code()
    graph_module.recompile()
    return graph_module


def is_annotated(nodes: list[Node]) -> bool:
    """True if any node carries a quantization annotation marked as annotated."""
    annotated = False
    for node in nodes:
        annotated = annotated or (
            Q_ANNOTATION_KEY in node.meta and node.meta[Q_ANNOTATION_KEY]._annotated
        )
    return annotated


def mark_nodes_as_annotated(nodes: list[Node]) -> None:
    """Mark every node as annotated, adding an empty annotation where there is none."""
    for node in nodes:
        if node is not None:
            if Q_ANNOTATION_KEY not in node.meta:
                node.meta[Q_ANNOTATION_KEY] = QuantizationAnnotation()
            node.meta[Q_ANNOTATION_KEY]._annotated = True


def new_annotation(
    input_qspec_map: dict[Node, Any] | None = None, output_qspec: Any = None
) -> QuantizationAnnotation:
    """A quantization annotation already marked as annotated."""
    return QuantizationAnnotation(
        input_qspec_map=input_qspec_map if input_qspec_map is not None else {},
        output_qspec=output_qspec,
        _annotated=True,
    )
