"""The edge verifier's argument check, once per graph.

ExecuTorch's edge verifier (``EXIREdgeDialectVerifier``) checks every operator's tensor dtypes
against its edge schema by running the whole graph through an Interpreter in FakeTensor mode
(``_check_tensor_args_matching_op_allowed_dtype``). ``to_edge_transform_and_lower`` validates the
same unchanged program up to six times in a row (mobilenet_v1_025: 12 checks of 5 distinct
graphs, ~40 ms each). `VERIFIED_GRAPHS` remembers the graphs that passed, by everything the
check reads: node order, ops, targets (type and name), arguments (nodes by name, tensors by
signature), each node's ``meta["val"]`` signature (dtype, shape, strides, device: the check's
inputs and return dtypes), get_attr values, and the data of one-element tensors (FakeTensor
may compute with those). A graph equal on all of that passes again without running; a graph
that fails is never remembered, so it fails every time, as stock; a graph holding anything
else (symbolic values, unknown argument types) always runs the check. The sources the key
follows are pinned in pass-infra's ``test_upstream_sources.py``.

A graph seen for the first time is checked on its recorded values: ExecuTorch's own validator,
with each call pass-infra vouches for (`replay_engine.is_vouched`: its ``meta["val"]`` is what
running it on its inputs' recorded values gives, the fact value reuse and fast-copy rest on), or
that is a ``Graph.node_copy`` of one computing the same value from the same value objects
(`replay_engine.is_vouched_copy`, never reused by a replay: partition programs are such copies),
giving that value instead of computing it in FakeTensor mode, and every other call run as stock
runs it and required to compute a value with the recorded one's metadata
(`_upstream.recorded_value_arg_validator`). The check reads only dtypes. A graph that check
does not pass runs the stock check (which raises its own error).
"""

from __future__ import annotations

import functools
from collections import OrderedDict
from collections.abc import Callable
from typing import Any

import torch
from torch.fx import GraphModule, Node

from lowerkit.pass_infra import _upstream
from lowerkit.pass_infra.accelerations.cheaper_replay import same_fake_metadata
from lowerkit.pass_infra.accelerations.patching import Patch, Replacement
from lowerkit.pass_infra.accelerations.replay_engine import is_vouched, is_vouched_copy, vouch_copy

__all__ = ["VERIFIED_GRAPHS", "graph_key", "passes_on_recorded_values"]

#: How many passing graphs are remembered (the oldest is forgotten first).
_REMEMBERED = 64
_passed: OrderedDict[Any, None] = OrderedDict()
_SCALARS = (bool, int, float, str, torch.dtype, torch.device, torch.memory_format, torch.layout)


class _Uncacheable(Exception):
    """The graph holds something `graph_key` cannot stand for exactly."""


def _value_key(value: Any) -> Any:
    if isinstance(value, torch.Tensor):
        if any(not isinstance(d, int) for d in (*value.shape, *value.stride())):
            raise _Uncacheable("symbolic shape")
        signature = (type(value).__name__, value.dtype, tuple(value.shape), value.stride(), str(value.device))
        return ("tensor", signature, _constant(value))
    if isinstance(value, (list, tuple)):
        return (type(value).__name__, tuple(_value_key(v) for v in value))
    if value is None:
        return None
    if isinstance(value, float):
        return ("float", repr(value))
    if isinstance(value, _SCALARS):
        return (type(value).__name__, value)
    raise _Uncacheable(type(value).__name__)


def _constant(value: torch.Tensor) -> Any:
    """The data of a one-element tensor: FakeTensor keeps those as constants and may compute with them."""
    if value.numel() > 1:
        return None
    if isinstance(value, _upstream.FakeTensor):
        value = value.constant
        if value is None:
            return None
    return repr(value.tolist())


def _arg_key(arg: Any) -> Any:
    if isinstance(arg, Node):
        return ("node", arg.name)
    if isinstance(arg, (list, tuple)):
        return (type(arg).__name__, tuple(_arg_key(a) for a in arg))
    if isinstance(arg, dict):
        return ("dict", tuple((k, _arg_key(v)) for k, v in arg.items()))
    return _value_key(arg)


#: Target -> `_target_key`: an edge operator's str() formats its whole schema, for every node
#: of every check; kept while a scope is open (see `VERIFIED_GRAPHS`).
_target_keys: dict[Any, Any] = {}


def _target_key(target: Any) -> Any:
    if isinstance(target, str):
        return target
    try:
        return _target_keys[target]
    except KeyError:
        key = _target_keys[target] = _describe_target(target)
        return key
    except TypeError:  # an unhashable target
        return _describe_target(target)


def _describe_target(target: Any) -> Any:
    return (type(target).__module__, type(target).__qualname__, getattr(target, "__module__", None), str(target))


def _attribute_key(module: GraphModule, target: str) -> Any:
    value: Any = module
    for part in target.split("."):
        value = getattr(value, part)
    if isinstance(value, torch.Tensor):
        return _value_key(value)
    return ("object", type(value).__module__, type(value).__qualname__)


def graph_key(module: GraphModule) -> Any:
    """Everything the argument check reads of `module`, hashable; raises `_Uncacheable`."""
    key = []
    for node in module.graph.nodes:
        entry = (node.op, node.name, _target_key(node.target), _arg_key(node.args), _arg_key(node.kwargs))
        value = _attribute_key(module, node.target) if node.op == "get_attr" else None
        key.append((entry, value, _value_key(node.meta["val"]) if "val" in node.meta else "no val"))
    return tuple(key)


def check_arguments_once(gm: GraphModule) -> None:
    """``_check_tensor_args_matching_op_allowed_dtype(gm)``, skipped for a graph that passed before."""
    try:
        key = graph_key(gm)
    except Exception:  # _Uncacheable, or a value the key cannot read (a sparse tensor's strides): run it
        key = None
    if key is not None and key in _passed:
        _passed.move_to_end(key)
        return
    if not passes_on_recorded_values(gm):
        _STOCK[0](gm)
    if key is not None:
        _passed[key] = None
        if len(_passed) > _REMEMBERED:
            _passed.popitem(last=False)


def _computes_alike(value: Any, recorded: Any) -> bool:
    """True when `value` has what a later fake call reads of `recorded` (tensor metadata, scalars)."""
    if isinstance(recorded, (list, tuple)):
        return (
            type(value) is type(recorded)
            and len(value) == len(recorded)
            and all(_computes_alike(v, r) for v, r in zip(value, recorded, strict=True))
        )
    if isinstance(recorded, torch.Tensor):
        return same_fake_metadata(value, recorded) or _same_constant(value, recorded)
    if recorded is None or type(recorded) in (int, float, bool):
        return type(value) is type(recorded) and value == recorded
    return False  # symbolic and other values: left to the stock check


def _same_constant(value: Any, recorded: Any) -> bool:
    """True when FakeTensors `value` and `recorded` hold equal constants (FakeTensor computes with
    those: a lifted constant's cast, as Hugging Face's attention masks) with equal metadata."""
    fakes = (value, recorded)
    if any(type(t) is not _upstream.FakeTensor or t.constant is None for t in fakes):
        return False
    if not (
        value.fake_mode is recorded.fake_mode
        and value.dtype == recorded.dtype
        and value.shape == recorded.shape
        and value.stride() == recorded.stride()
        and value.device == recorded.device
        and value.storage_offset() == recorded.storage_offset()
        and value.requires_grad == recorded.requires_grad
        and value.constant.dtype == recorded.constant.dtype
    ):
        return False
    with _upstream.outside_fake_mode():  # the check runs in the graph's fake mode
        return bool(torch.equal(value.constant, recorded.constant))


class _StaleValue(Exception):
    """A call not vouched for computes a value other than the one it recorded."""


@functools.cache
def _validator_class() -> type:
    """ExecuTorch's dtype validator reading each vouched-for call's recorded value, running the others."""

    class RecordedValueValidator(_upstream.recorded_value_arg_validator()):  # type: ignore[misc]
        def recorded_value(self, node: Node, run: Callable[[], Any]) -> Any:
            recorded = node.meta["val"]
            if is_vouched(node) or is_vouched_copy(node):
                return recorded
            if not _computes_alike(run(), recorded):
                raise _StaleValue(node.name)
            return recorded  # what its users computed with when they were vouched for

    return RecordedValueValidator


def passes_on_recorded_values(gm: GraphModule) -> bool:
    """True when the dtype check passes `gm`, run on its calls' recorded values.

    A call pass-infra vouches for gives its recorded ``meta["val"]``; any other call runs (in
    the graph's fake mode, as stock) and must compute a value with the recorded one's metadata.
    False means "run the stock check": a call without a value, a ``call_module``, a recorded value
    that is stale, a dtype mismatch, or any error (the stock check raises its own).
    """
    for node in gm.graph.nodes:
        if node.op == "call_module" or (node.op == "call_function" and "val" not in node.meta):
            return False
    validator = _validator_class()(gm)
    try:
        with _upstream.edge_verifier_context(gm):
            validator.run(*_upstream.edge_verifier_inputs(gm))
    except _upstream.higher_order_call_error():
        return True  # the stock check stops at a delegate call and passes, too
    except Exception:
        return False
    return not validator.violating_ops


_STOCK: list[Any] = []
_STOCK_NODE_COPY = torch.fx.Graph.node_copy


def _node_copy(self: torch.fx.Graph, node: Node, arg_transform: Callable[[Node], Any] = lambda x: x) -> Node:
    """``Graph.node_copy``, recording for this check a copy that computes a vouched node's value
    (`replay_engine.vouch_copy`): partition programs are made of such copies."""
    copy = _STOCK_NODE_COPY(self, node, arg_transform)
    vouch_copy(copy, node)
    return copy


def _replacements() -> list[Replacement]:
    module = _upstream.edge_verifier_module()
    _STOCK[:] = [getattr(module, _upstream.ARGUMENT_CHECK)]
    return [
        Replacement(module, _upstream.ARGUMENT_CHECK, check_arguments_once),
        Replacement(torch.fx.Graph, "node_copy", _node_copy),
    ]


#: Held by ``accelerated_lowering()``; forgets every graph when its last scope closes.
VERIFIED_GRAPHS = Patch(
    "lowerkit.pass_infra.accelerations.verified_graphs", _replacements, on_uninstall=[_passed.clear, _target_keys.clear]
)
