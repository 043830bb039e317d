"""Matching graph nodes against a pass's targeted ops (nested graph modules included)."""

from __future__ import annotations

from collections.abc import Hashable, Iterable, Iterator
from typing import Any

from torch.fx import GraphModule

from lowerkit.pass_infra._upstream import (
    EdgeOpOverload,
    EdgeOpOverloadPacket,
    OpOverload,
    OpOverloadPacket,
    qualified_op_name,
)
from lowerkit.pass_infra.errors import PassInfraError

__all__ = [
    "count_nodes",
    "declared_keys",
    "graph_has_target",
    "graph_modules",
    "is_targeted",
    "target_keys",
]

_PACKET_TYPES = (OpOverloadPacket, EdgeOpOverloadPacket)
_OVERLOAD_TYPES = (OpOverload, EdgeOpOverload)


def _overload_key(op: Any) -> Hashable:
    # Edge and ATen overloads of the same schema share a key on purpose: matching
    # more is the safe direction (a match means full dispatch / the pass runs).
    return ("overload", op.name())


def _packet_key(op: Any) -> Hashable:
    return ("packet", qualified_op_name(op))


def declared_keys(ops: Iterable[Any]) -> frozenset[Hashable]:
    """The match keys of a pass's declared targets (overloads, packets or callables)."""
    keys: set[Hashable] = set()
    for op in ops:
        if isinstance(op, _OVERLOAD_TYPES):
            keys.add(_overload_key(op))
        elif isinstance(op, _PACKET_TYPES):
            keys.add(_packet_key(op))
        elif callable(op):
            try:
                hash(op)
            except TypeError as exc:
                raise PassInfraError(
                    f"targeted op {op!r} is not hashable; list op overloads, op packets "
                    "or plain functions in targeted_ops"
                ) from exc
            keys.add(("callable", op))
        else:
            raise PassInfraError(
                f"targeted op {op!r} ({type(op).__name__}) is not an operator; list op "
                "overloads (torch.ops.aten.add.Tensor, exir_ops.edge...), op packets or "
                "functions in targeted_ops"
            )
    return frozenset(keys)


_TARGET_KEY_CACHE: dict[Any, tuple[Hashable, ...]] = {}


def target_keys(target: Any) -> tuple[Hashable, ...]:
    """Every key a node target matches: its overload, its packet, or itself."""
    try:
        return _TARGET_KEY_CACHE[target]
    except KeyError:
        pass
    except TypeError:  # unhashable target
        return ()
    keys: tuple[Hashable, ...]
    if isinstance(target, _OVERLOAD_TYPES):
        keys = (_overload_key(target), ("packet", target.name().split(".")[0]))
    elif isinstance(target, _PACKET_TYPES):
        keys = (_packet_key(target),)
    else:
        keys = (("callable", target),)
    _TARGET_KEY_CACHE[target] = keys
    return keys


def is_targeted(target: Any, keys: frozenset[Hashable]) -> bool:
    """True when a node target matches one of `keys`."""
    return any(k in keys for k in target_keys(target))


def graph_modules(graph_module: GraphModule) -> Iterator[GraphModule]:
    """`graph_module` and every GraphModule nested in it (cond/map/while bodies), once each."""
    seen: set[int] = set()
    stack = [graph_module]
    while stack:
        gm = stack.pop()
        if id(gm) in seen:
            continue
        seen.add(id(gm))
        yield gm
        stack.extend(m for m in gm.children() if isinstance(m, GraphModule))
        # A nested graph may hang off a get_attr that is not a direct child.
        for node in gm.graph.nodes:
            if node.op == "get_attr":
                value = getattr(gm, str(node.target), None)
                if isinstance(value, GraphModule):
                    stack.append(value)


def graph_has_target(graph_module: GraphModule, keys: frozenset[Hashable]) -> bool:
    """True when a call_function node anywhere in the graph module tree matches `keys`."""
    for gm in graph_modules(graph_module):
        for node in gm.graph.nodes:
            if node.op == "call_function" and is_targeted(node.target, keys):
                return True
    return False


def count_nodes(graph_module: GraphModule) -> int:
    """Number of nodes in the graph module tree."""
    return sum(len(gm.graph.nodes) for gm in graph_modules(graph_module))
