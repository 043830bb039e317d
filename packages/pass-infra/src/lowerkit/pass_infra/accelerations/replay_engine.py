"""The replay engine's shared ground: direct node copies, vouched metadata, the pipeline flag.

What `cheaper_replay` (the `CHEAP_REPLAY` patch), the targeted passes (fast-copy), the edge
verifier's check (`verified_graphs`) and the delegate rule (`delegate_values`) rely on; no patch
is defined here. Every private upstream name is reached through `_upstream`.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import torch
from torch.fx import Node

from lowerkit.pass_infra import _upstream
from lowerkit.pass_infra._upstream import (
    COPY_META_FIELDS,
    shared_node_source,
)

__all__ = [
    "copy_node_direct",
    "in_pipeline",
    "indistinguishable",
    "is_vouched",
    "is_vouched_copy",
    "pipeline_running",
    "vouch_copy",
    "vouch_graph",
    "vouch_node",
]


def copy_node_direct(
    tracer: Any, n: Node, target: Any, args: Any, kwargs: Any, name: str | None, pass_name: str
) -> Node | None:
    """Create `n`'s replay node in `tracer.graph` with the metadata the stock replay leaves.

    Stock: ``tracer.create_node`` under ``set_current_meta(n)`` (which copies stack_trace,
    the _COPY_META_FIELDS and a provenance record from n's meta), then
    ``meta.update(n.meta)``. When n's meta already holds everything create_node would
    derive (seq_nr, eager input values for an op that gets them; no autograd / replay state),
    the result is n's meta in create_node's key order, built here directly. Returns None when that precondition fails; the
    caller then goes through ``tracer.create_node``.
    """
    old = n.meta
    if not _upstream.direct_copy_possible(tracer, old, target):
        return None
    stack = old.get("stack_trace")
    node = _upstream.append_call_node(tracer.graph, target, args, kwargs, name)
    _upstream.register_scope(tracer, node)
    meta = node.meta
    if stack:
        meta["stack_trace"] = stack
    for key in COPY_META_FIELDS:
        if key == "from_node":
            meta[key] = old[key] if key in old else [shared_node_source(n, pass_name)]
        elif key in old:
            meta[key] = old[key]
    meta["seq_nr"] = old["seq_nr"]
    if "eager_input_vals" in old and _upstream.needs_eager_input_vals(target):
        meta["eager_input_vals"] = old["eager_input_vals"]  # where PythonKeyTracer puts its own
    meta.update(old)
    return node



# ----------------------------------------------------------------- vouched metadata
#
# Re-using a node's recorded meta["val"] (value reuse, fast-copy) is only sound when
# that value is what a FakeTensor dispatch of the node would produce. Passes that edit
# a graph in place may leave stale values behind (e.g. copy another node's meta onto a
# new node and rely on the next replay to fix it). So a value is re-used only from a
# node that is *vouched for*: created by a replay under pass-infra (whose value came
# from a dispatch or from a vouched node), or present in a PassPipeline's input graph,
# and unchanged since (same target, args, kwargs and meta["val"] objects). The record is
# an attribute of the graph node itself (no torch class or module state is touched).

_VOUCH_ATTR = "_lowerkit_vouched"
#: A weaker record: a ``Graph.node_copy`` of a vouched node, computing the same value
#: (`vouch_copy`). Read by the edge verifier's dtype check (`verified_graphs`) and by the delegate
#: call rule (`delegate_values`), never to reuse the copy's own value in a replay.
_COPY_ATTR = "_lowerkit_vouched_copy"


def _input_values(node: Node) -> tuple[Any, ...]:
    return tuple([arg.meta.get("val") for arg in node.all_input_nodes])


def _value_record(node: Node) -> tuple[Any, ...]:
    return (node.target, node.args, node.kwargs, node.meta.get("val"), _input_values(node))


def vouch_node(node: Node) -> None:
    """Record that `node`'s current meta["val"] is consistent with its op and inputs."""
    setattr(node, _VOUCH_ATTR, _value_record(node))


def is_vouched(node: Node) -> bool:
    """True when `node` was vouched for and its target, args, kwargs, val and its inputs' vals are unchanged.

    An input's value replaced in place (a pass that reshapes a placeholder, then replays)
    makes the node's recorded value suspect.
    """
    return _unchanged_since(node, getattr(node, _VOUCH_ATTR, None))


def vouch_copy(copy: Node, original: Node) -> None:
    """Record (`_COPY_ATTR`) that `copy`, a ``Graph.node_copy`` of `original`, computes its value:
    when `original` is vouched for (or such a copy) and `copy` has its op, its value and arguments
    alike, node arguments holding the very value objects (deep copies of programs and partition
    programs are built of such copies)."""
    if (
        copy.op == "call_function"
        and copy.meta.get("val") is original.meta.get("val")
        and (is_vouched(original) or is_vouched_copy(original))
        and _copied_alike(copy, original)
    ):
        setattr(copy, _COPY_ATTR, _value_record(copy))


def is_vouched_copy(node: Node) -> bool:
    """True when `vouch_copy` recorded `node` and its target, args, kwargs, val and inputs' vals are unchanged."""
    return _unchanged_since(node, getattr(node, _COPY_ATTR, None))


def _val_identity(node: Node) -> Any:
    """The identity of `node`'s value object (the node itself when it has none)."""
    value = node.meta.get("val")
    return node if value is None else id(value)


def _copied_alike(copy: Node, original: Node) -> bool:
    if copy.target is not original.target:
        return False
    try:
        return bool(
            torch.fx.node.map_arg((copy.args, copy.kwargs), _val_identity)
            == torch.fx.node.map_arg((original.args, original.kwargs), _val_identity)
        )
    except Exception:  # an argument whose == is not a bool (a tensor)
        return False


def _unchanged_since(node: Node, record: tuple[Any, ...] | None) -> bool:
    if (
        record is None
        or record[0] is not node.target
        or record[1] is not node.args
        or record[2] is not node.kwargs
        or record[3] is not node.meta.get("val")
    ):
        return False
    recorded_inputs = record[4]
    inputs = node.all_input_nodes
    return len(inputs) == len(recorded_inputs) and all(
        arg.meta.get("val") is value for arg, value in zip(inputs, recorded_inputs, strict=True)
    )


def indistinguishable(old: Any, new: Any) -> bool:
    """True for two static fake tensors of one mode that no metadata tells apart (shape, strides,
    offset, dtype, device, layout, grad): a fake dispatch reads the same from either."""
    if not (isinstance(old, _upstream.FakeTensor) and isinstance(new, _upstream.FakeTensor)) or type(old) is not type(new):
        return False
    if old.fake_mode is not new.fake_mode:
        return False
    sizes = (*old.shape, *old.stride(), *new.shape, *new.stride())
    if any(not isinstance(s, int) for s in sizes):  # symbolic: nothing to compare
        return False
    return bool(
        old.shape == new.shape
        and old.stride() == new.stride()
        and old.storage_offset() == new.storage_offset()
        and old.dtype == new.dtype
        and old.device == new.device
        and old.layout == new.layout
        and old.requires_grad == new.requires_grad
    )


def vouch_graph(graph_module: Any) -> None:
    """Vouch for every node of a graph module tree (its metadata is taken as consistent)."""
    for module in graph_module.modules():
        if isinstance(module, torch.fx.GraphModule):
            for node in module.graph.nodes:
                vouch_node(node)


_pipeline_tls = threading.local()


@contextmanager
def pipeline_running() -> Iterator[None]:
    """Mark that a PassPipeline is running (it vouches for its input graph itself)."""
    depth = getattr(_pipeline_tls, "depth", 0)
    _pipeline_tls.depth = depth + 1
    try:
        yield
    finally:
        _pipeline_tls.depth = depth


def in_pipeline() -> bool:
    """True inside a PassPipeline run."""
    return bool(getattr(_pipeline_tls, "depth", 0))
