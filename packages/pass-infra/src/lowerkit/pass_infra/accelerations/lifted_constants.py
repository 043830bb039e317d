"""lifted_constants: ExecuTorch's constant lift keeps the replay engine's vouches.

``to_edge`` turns scalar arguments into tensor constants (``ScalarToTensorPass``, a replay), then
``lift_constant_tensor_pass`` moves each constant from a ``get_attr`` node to a placeholder, in
place: every call that reads one gets new arguments, so the replay engine no longer vouches for
its recorded value, although a dispatch gives the same (the placeholder's value has the
``get_attr``'s metadata). When nothing replays the program before a partitioner copies it (Core
ML), such a call makes its delegate unvouched (`delegate_values`), and ExecuTorch's fake kernel
then runs the whole delegated program at every replay in ``to_executorch`` (RMSNorm's
``mean + eps`` in every block of an LLM).

Within `LIFTED_CONSTANTS` the lift is stock's; afterwards a call vouched for before it is vouched
again when its only change is a lifted placeholder in place of a ``get_attr`` it read, the two
values alike, its operator returns no alias of an argument, and another of its arguments is a
tensor that is not a constant (so a fake dispatch folds nothing).
"""

from __future__ import annotations

from typing import Any

import torch
from torch.fx import Node

from lowerkit.pass_infra import _upstream
from lowerkit.pass_infra.accelerations.patching import Patch, Replacement
from lowerkit.pass_infra.accelerations.replay_engine import (
    indistinguishable,
    is_vouched,
    vouch_node,
)

__all__ = ["LIFTED_CONSTANTS"]

_STOCK_LIFT = _upstream.stock_lift_constant_tensor_pass

#: A call's state before the lift: its target, flat arguments and recorded value.
_Before = tuple[Any, list[Any], Any]


def _lift_keeping_vouches(program: Any) -> Any:
    """``lift_constant_tensor_pass(program)``, then vouching again for the calls it only re-pointed."""
    graph = program.graph
    attributes = {node for node in graph.nodes if node.op == "get_attr"}
    before: dict[Node, _Before] = {
        user: (user.target, _flat_arguments(user), user.meta.get("val"))
        for attribute in attributes
        for user in attribute.users
        if user.op == "call_function" and is_vouched(user)
    }
    lifted = _STOCK_LIFT(program)
    for call, state in before.items():
        if call.graph is graph and _only_constants_lifted(call, state, attributes):
            vouch_node(call)
    return lifted


def _flat_arguments(node: Node) -> list[Any]:
    return list(_upstream.pytree.tree_leaves((node.args, node.kwargs)))


def _only_constants_lifted(call: Node, before: _Before, attributes: set[Node]) -> bool:
    target, arguments, value = before
    if call.target is not target or call.meta.get("val") is not value or not _returns_fresh(target):
        return False
    now = _flat_arguments(call)
    if len(now) != len(arguments) or not any(new is old and _plain_tensor(new) for old, new in zip(arguments, now, strict=True)):
        return False
    return all(
        new is old
        or (isinstance(old, Node) and old in attributes and _is_lifted(new) and indistinguishable(old.meta.get("val"), new.meta.get("val")))
        for old, new in zip(arguments, now, strict=True)
    )


def _returns_fresh(target: Any) -> bool:
    """True when `target` is an operator none of whose results aliases an argument."""
    return isinstance(target, (_upstream.OpOverload, _upstream.EdgeOpOverload)) and not _upstream.returns_alias(target)


def _plain_tensor(arg: Any) -> bool:
    value = arg.meta.get("val") if isinstance(arg, Node) else None
    return isinstance(value, torch.Tensor) and getattr(value, "constant", None) is None


def _is_lifted(node: Any) -> bool:
    return isinstance(node, Node) and node.op == "placeholder"


#: Held by ``accelerated_lowering()``.
LIFTED_CONSTANTS = Patch(
    "lowerkit.pass_infra.accelerations.lifted_constants",
    lambda: [Replacement(_upstream.exir_program_module, _upstream.LIFT_CONSTANT_TENSOR_PASS, _lift_keeping_vouches)],
)
