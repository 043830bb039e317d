"""Structural comparison of two graph modules (what verify mode checks)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import torch
from torch.fx import GraphModule, Node

__all__ = ["GraphDifference", "first_difference"]


@dataclass(frozen=True)
class GraphDifference:
    """Where two graphs first differ: the node (in the checked graph) and what differs."""

    node: str
    detail: str

    def __str__(self) -> str:
        return f"{self.node}: {self.detail}"


def _val_signature(value: Any) -> Any:
    if isinstance(value, torch.Tensor):
        return (
            "tensor",
            tuple(map(str, value.shape)),
            value.dtype,
            tuple(map(str, value.stride())),
        )
    if isinstance(value, (list, tuple)):
        return (type(value).__name__, tuple(_val_signature(v) for v in value))
    if isinstance(value, (torch.SymInt, torch.SymFloat, torch.SymBool)):
        return ("sym", str(value))
    if value is None or isinstance(value, (int, float, bool, str)):
        return value
    return ("other", type(value).__name__)


def _arg_signature(arg: Any, index: dict[Node, int]) -> Any:
    if isinstance(arg, Node):
        return ("node", index.get(arg, arg.name))
    if isinstance(arg, (list, tuple)):
        return (type(arg).__name__ in ("tuple",), tuple(_arg_signature(a, index) for a in arg))
    if isinstance(arg, dict):
        return tuple(sorted((k, _arg_signature(v, index)) for k, v in arg.items()))
    if isinstance(arg, GraphModule):
        return ("graph_module",)
    return arg


def _target_signature(target: Any) -> Any:
    return target if isinstance(target, str) else (getattr(target, "__module__", None), str(target))


def _where(node: Node, prefix: str) -> str:
    return f"{prefix}{node.name} ({node.format_node()})"


def first_difference(
    reference: GraphModule, checked: GraphModule, *, prefix: str = ""
) -> GraphDifference | None:
    """The first node where `checked` differs from `reference`, or None if they match.

    Compared: node order, op, target, args and kwargs (nodes by position), and
    ``meta["val"]`` shape / dtype / stride; nested graph modules recursively.
    """
    ref_nodes = list(reference.graph.nodes)
    new_nodes = list(checked.graph.nodes)
    ref_index = {n: i for i, n in enumerate(ref_nodes)}
    new_index = {n: i for i, n in enumerate(new_nodes)}
    for i, (a, b) in enumerate(zip(ref_nodes, new_nodes, strict=False)):
        if a.op != b.op:
            return GraphDifference(
                _where(b, prefix), f"op {b.op!r}, reference has {a.op!r} ({a.name})"
            )
        if _target_signature(a.target) != _target_signature(b.target):
            return GraphDifference(
                _where(b, prefix), f"target {b.target}, reference has {a.target} (node #{i})"
            )
        if _arg_signature(a.args, ref_index) != _arg_signature(b.args, new_index):
            return GraphDifference(_where(b, prefix), f"args differ; reference: {a.format_node()}")
        if _arg_signature(a.kwargs, ref_index) != _arg_signature(b.kwargs, new_index):
            return GraphDifference(
                _where(b, prefix), f"kwargs differ; reference: {a.format_node()}"
            )
        va = _val_signature(a.meta.get("val"))
        vb = _val_signature(b.meta.get("val"))
        if va != vb:
            return GraphDifference(_where(b, prefix), f"meta['val'] {vb}, reference has {va}")
        if a.op == "get_attr":
            sub_a = getattr(reference, str(a.target), None)
            sub_b = getattr(checked, str(b.target), None)
            if isinstance(sub_a, GraphModule) and isinstance(sub_b, GraphModule):
                diff = first_difference(sub_a, sub_b, prefix=f"{prefix}{b.target}.")
                if diff is not None:
                    return diff
            elif isinstance(sub_a, GraphModule) != isinstance(sub_b, GraphModule):
                return GraphDifference(_where(b, prefix), "attribute kind differs")
    if len(ref_nodes) != len(new_nodes):
        if len(new_nodes) > len(ref_nodes):
            extra = new_nodes[len(ref_nodes)]
            return GraphDifference(
                _where(extra, prefix),
                f"extra node; graph has {len(new_nodes)} nodes, reference {len(ref_nodes)}",
            )
        missing = ref_nodes[len(new_nodes)]
        return GraphDifference(
            f"{prefix}{missing.name} (missing)",
            f"graph has {len(new_nodes)} nodes, reference {len(ref_nodes)}",
        )
    return None
