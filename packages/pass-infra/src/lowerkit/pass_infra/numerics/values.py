"""The value of every node of a torch graph on one input, and the user-code name of a node."""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from typing import Any

import torch

__all__ = [
    "DATA_MOVEMENT_OPS",
    "DEQUANTIZE_OPS",
    "QUANTIZE_OPS",
    "counterparts",
    "is_op",
    "layer_name",
    "module_path",
    "moves_data",
    "node_values",
    "op_label",
    "outputs_on",
]

#: pt2e's activation quantize / dequantize ops (torchao and torch spell them the same).
QUANTIZE_OPS = frozenset({"quantize_per_tensor"})
DEQUANTIZE_OPS = frozenset({"dequantize_per_tensor", "dequantize_per_channel"})
#: Ops that only move, select or copy values (the quantizers give their output the input's
#: quantization parameters): they add no quantization error of their own.
DATA_MOVEMENT_OPS = frozenset({
    "slice", "slice_copy", "select", "select_copy", "narrow", "index_select", "view", "view_copy", "_unsafe_view",
    "reshape", "flatten", "unflatten", "squeeze", "squeeze_copy", "unsqueeze", "unsqueeze_copy", "permute",
    "permute_copy", "transpose", "transpose_copy", "t", "t_copy", "cat", "concat", "stack", "pad",
    "constant_pad_nd", "split", "split_with_sizes", "split_copy", "chunk", "unbind", "expand", "expand_copy",
    "repeat", "clone", "contiguous", "pixel_shuffle", "pixel_unshuffle", "channel_shuffle", "max_pool2d",
    "adaptive_max_pool2d", "getitem", "alias", "alias_copy",
})


class _Recorder(torch.fx.Interpreter):
    def __init__(self, module: torch.fx.GraphModule) -> None:
        super().__init__(module)
        self.values: dict[str, Any] = {}

    def run_node(self, n: torch.fx.Node) -> Any:
        result = super().run_node(n)
        if isinstance(result, torch.Tensor):
            self.values[n.name] = result.detach().clone()
        return result


def node_values(module: torch.fx.GraphModule, inputs: tuple[Any, ...]) -> dict[str, torch.Tensor]:
    """Every tensor-valued node's value (by node name) when `module` runs on `inputs`."""
    recorder = _Recorder(module)
    with torch.no_grad():
        recorder.run(*inputs)
    return recorder.values


def module_path(node: torch.fx.Node) -> str:
    """The innermost module that made `node` (e.g. ``features.3.0``), or "" for the root."""
    stack = node.meta.get("nn_module_stack") or {}
    if not stack:
        return ""
    path = list(stack.values())[-1]
    return str(path[0] if isinstance(path, tuple) else path)


def op_label(node: torch.fx.Node) -> str:
    """``aten.conv2d`` for ``aten.conv2d.default``."""
    base = getattr(node.target, "__name__", str(node.target)).split(".")[0]
    namespace = getattr(node.target, "namespace", None)
    return f"{namespace}.{base}" if namespace else base


def layer_name(node: torch.fx.Node) -> str:
    """How a report names `node`: its module path, or the node's own name at the root."""
    return module_path(node) or node.name


def is_op(node: Any, names: frozenset[str]) -> bool:
    """True when `node` calls one of the ops named (by their bare name, e.g. quantize_per_tensor)."""
    if getattr(node, "op", None) != "call_function":
        return False
    name = getattr(node.target, "__name__", str(node.target))
    return name.split(".")[0] in names


def outputs_on(program: Any, batches: Sequence[tuple[Any, ...]]) -> list[torch.Tensor]:
    """The outputs of `program` (a module, or an ExportedProgram run as its module) on every batch,
    flattened into one list: one signal for ``sqnr_db``."""
    module = program.module() if isinstance(program, torch.export.ExportedProgram) else program
    found: list[torch.Tensor] = []
    with torch.no_grad():
        for batch in batches:
            result = module(*batch)
            found += list(result) if isinstance(result, list | tuple) else [result]
    return found


def moves_data(op: str) -> bool:
    """True for an op label (``aten.slice``) of DATA_MOVEMENT_OPS."""
    return op.rsplit(".", 1)[-1] in DATA_MOVEMENT_OPS


def counterparts(first: torch.fx.Graph, second: torch.fx.Graph) -> dict[str, str]:
    """For each op node of `second`, the node of `first` that computes the same thing: the k-th
    call of the same op in the same module, both in graph order (by name, a float program and its
    quantized program disagree: a quantizer's decompositions, e.g. of LayerNorm, add nodes, and a
    re-export renumbers the rest; the added nodes sit in the decomposed op's module, where the
    float program has no such op)."""

    def keyed(graph: torch.fx.Graph) -> dict[tuple[str, str, int], str]:
        seen: Counter[tuple[str, str]] = Counter()
        found = {}
        for node in graph.nodes:
            if node.op != "call_function":
                continue
            kind = (module_path(node), op_label(node))
            found[(*kind, seen[kind])] = node.name
            seen[kind] += 1
        return found

    mine = keyed(first)
    return {name: mine[key] for key, name in keyed(second).items() if key in mine}
