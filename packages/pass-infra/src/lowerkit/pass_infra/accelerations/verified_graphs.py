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
"""

from __future__ import annotations

from collections import OrderedDict
from typing import Any

import torch
from torch.fx import GraphModule, Node

from lowerkit.pass_infra import _upstream
from lowerkit.pass_infra.accelerations.patching import Patch, Replacement

__all__ = ["VERIFIED_GRAPHS", "graph_key"]

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
    _STOCK[0](gm)
    if key is not None:
        _passed[key] = None
        if len(_passed) > _REMEMBERED:
            _passed.popitem(last=False)


_STOCK: list[Any] = []


def _replacements() -> list[Replacement]:
    module = _upstream.edge_verifier_module()
    _STOCK[:] = [getattr(module, _upstream.ARGUMENT_CHECK)]
    return [Replacement(module, _upstream.ARGUMENT_CHECK, check_arguments_once)]


#: Held by ``accelerated_lowering()``; forgets every graph when its last scope closes.
VERIFIED_GRAPHS = Patch(
    "lowerkit.pass_infra.accelerations.verified_graphs", _replacements, on_uninstall=[_passed.clear, _target_keys.clear]
)
