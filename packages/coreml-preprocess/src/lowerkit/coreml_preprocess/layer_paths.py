"""Which torch layer each weight of a converted Core ML program belongs to, and what reads it.

coremltools names a weight after conversion passes (``const_45_to_fp16`` once a batch norm is
folded into its convolution), so names cannot tell which torch module a weight came from. The
ops that read it keep the ExecuTorch debug handles of the edge nodes they came from
(``ScopeSource.EXIR_DEBUG_HANDLE``); the handle leads to the edge node, and from a folded
batch norm back to its convolution, whose ``nn_module_stack`` names the layer (``stem.0``).
"""

from __future__ import annotations

import math
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from lowerkit.coreml_preprocess import _upstream
from lowerkit.pass_infra.helpers.graph_ops import op_name

__all__ = ["WeightReader", "WeightUse", "weight_uses"]

#: Edge ops (by the name of their overload packet) that read a weight as a layer.
_WEIGHTED_OPS = frozenset(
    {
        "convolution", "conv1d", "conv2d", "conv3d", "conv_transpose1d", "conv_transpose2d",
        "conv_transpose3d", "linear", "addmm", "mm", "bmm", "matmul", "embedding",
    }
)
#: Ops coremltools folds into the layer before them (their MIL op keeps their debug handle).
_FOLDED_OPS = frozenset({"_native_batch_norm_legit_no_training", "batch_norm", "native_batch_norm", "getitem"})
#: How far back through folded ops to look for the layer.
_WALK_DEPTH = 3


@dataclass(frozen=True)
class WeightReader:
    """One op reading a weight: its MIL op type (``depthwise_conv`` for a depthwise conv) and layer."""

    op_type: str
    #: Module path of the torch layer (``nn_module_stack``), e.g. ``stack1.conv1.0``; "" if unknown.
    module_path: str
    #: The MIL op's name.
    op_name: str


@dataclass(frozen=True)
class WeightUse:
    """A float weight (a MIL ``const``) of a converted program and the ops that read it."""

    const_name: str
    shape: tuple[int, ...]
    readers: tuple[WeightReader, ...]

    @property
    def size(self) -> int:
        """Number of elements."""
        return math.prod(self.shape)


def _packet_name(node: Any) -> str:
    """``conv2d`` for ``aten::conv2d`` (edge and ATen overloads alike)."""
    return op_name(node.target).split("::")[-1].split(".")[0]


def _module_path(node: Any) -> str:
    stack = node.meta.get("nn_module_stack") or {}
    if not stack:
        return ""
    return str(list(stack.values())[-1][0])


def _layer_node(node: Any) -> Any:
    """The weighted node behind `node` (itself, or the layer a folded batch norm reads)."""
    current = node
    for _ in range(_WALK_DEPTH):
        name = _packet_name(current)
        if name in _WEIGHTED_OPS:
            return current
        if name not in _FOLDED_OPS:
            break
        inputs = [a for a in current.args if hasattr(a, "op") and a.op == "call_function"]
        if not inputs:
            break
        current = inputs[0]
    return node


def layer_paths_by_debug_handle(edge_program: Any) -> dict[int, str]:
    """``{debug handle: module path of the layer}`` for the edge program's call nodes."""
    paths: dict[int, str] = {}
    if edge_program is None:
        return paths
    for node in edge_program.graph.nodes:
        handle = node.meta.get("debug_handle")
        if node.op != "call_function" or not isinstance(handle, int):
            continue
        paths[handle] = _module_path(_layer_node(node))
    return paths


def _operations(block: Any) -> Iterator[Any]:
    for op in block.operations:
        yield op
        for nested in getattr(op, "blocks", ()):
            yield from _operations(nested)


def _reader_type(op: Any, const_var: Any) -> str:
    if op.op_type != "conv":
        return str(op.op_type)
    groups = op.inputs.get("groups")
    weight = op.inputs.get("weight")
    group_count = int(groups.val) if groups is not None and groups.val is not None else 1
    if weight is const_var and group_count > 1 and len(weight.shape) > 1 and weight.shape[1] == 1:
        return "depthwise_conv"
    return "conv"


def _readers(var: Any, paths: dict[int, str]) -> Iterator[WeightReader]:
    for child in var.child_ops:
        if child.op_type.startswith("constexpr_"):
            continue  # already compressed (e.g. by op_linear_quantizer_config)
        handles = _upstream.exir_debug_handles(child)
        path = next((paths[h] for h in handles if h in paths), "")
        yield WeightReader(_reader_type(child, var), path, str(child.name))


def weight_uses(program: Any, edge_program: Any) -> list[WeightUse]:
    """Every float ``const`` of at least 10 elements read by a non-constexpr op, in program order."""
    paths = layer_paths_by_debug_handle(edge_program)
    uses: list[WeightUse] = []
    for function in program.functions.values():
        for op in _operations(function):
            if op.op_type != "const":
                continue
            var = op.outputs[0]
            value = var.val
            if not _upstream.is_float_weight(value):
                continue
            readers = tuple(_readers(var, paths))
            if readers:
                uses.append(WeightUse(str(op.name), tuple(int(d) for d in value.shape), readers))
    return uses
