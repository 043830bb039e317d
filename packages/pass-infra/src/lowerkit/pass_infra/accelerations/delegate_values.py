"""A delegate call's recorded value, vouched for by the program it delegates.

``to_executorch`` replays the top-level graph, and a replay of ``executorch_call_delegate`` runs
ExecuTorch's fake kernel for it: it unlifts the lowered module's whole original program (deep
copies of every node) and runs it in FakeTensor mode, to compute values the call records already
(DeiT-tiny: ~2 s). `delegate_call_value` gives the recorded value, in the container that run
returns, when it is what that run gives (the replay engine asks it, for a delegate call not
vouched for):
the original program's user inputs hold the very value objects of the call's inputs, its outputs
the very objects of the call's value (or those detached, as a replay recorded them), it mutates
none of its inputs (a buffer it owns, as a delegate holding a KV cache does, it may: the kernel
writes that only into its own unlifted copy, and a fake write changes no value), no input
requires grad (the kernel then runs the program without autograd, so an output recorded with
grad is given detached), and each of its calls is vouched for
(`replay_engine.is_vouched`) or a copy of one computing the same value
(`replay_engine.is_vouched_copy`: partition programs are made of such copies), and no output is
an input. A replay then reuses the call's value as it does a vouched node's, also when its
inputs are new values with the recorded ones' metadata (a fake run reads only that).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch
from torch.export.graph_signature import OutputKind
from torch.fx import Node

from lowerkit.pass_infra import _upstream

__all__ = ["delegate_call_value"]

#: What a vouched program may return: its outputs, and the new values of buffers it owns (the
#: fake kernel returns only the outputs; the buffers' new values are written into its own copy).
_OUTPUTS_OR_OWN_STATE = (OutputKind.USER_OUTPUT, OutputKind.BUFFER_MUTATION)

#: Node attribute: (an output's recorded value, that value detached), made by `_without_grad`.
_WITHOUT_GRAD_ATTR = "_lowerkit_without_grad"


def delegate_call_value(node: Node, computes_its_value: Callable[[Node], bool]) -> Any:
    """The value ExecuTorch's kernel gives `node`, an ``executorch_call_delegate`` call, made of
    its recorded values (in the container the program's output spec makes), when its lowered
    module's original program computes them from its inputs' recorded values; else None.
    `computes_its_value` says it of one call of that program (the replay engine's vouch)."""
    program = _delegated_program(node)
    outputs = None if program is None else _kernel_outputs(node, program, computes_its_value)
    if outputs is None:
        return None
    return _upstream.pytree.tree_unflatten(outputs, program.module_call_graph[0].signature.out_spec)


def _delegated_program(node: Node) -> Any:
    """The original program of the lowered module `node` calls, or None."""
    if node.target is not _upstream.executorch_call_delegate() or not node.args:
        return None
    module_arg = node.args[0]
    owner = node.graph.owning_module
    if not isinstance(module_arg, Node) or module_arg.op != "get_attr" or owner is None:
        return None
    program = getattr(owner.get_submodule(str(module_arg.target)), "original_module", None)
    if program is None or not program.module_call_graph or program.module_call_graph[0].signature is None:
        return None
    return program


def _kernel_outputs(node: Node, program: Any, computes_its_value: Callable[[Node], bool]) -> list[Any] | None:
    """The recorded values of `program`'s user outputs, when they are what the kernel computes for
    `node`; else None. The call records either all the program returns (as ``to_backend`` made it:
    owned buffers' new values first) or its user outputs (as a replay of the kernel records it)."""
    inputs, values = node.args[1:], node.meta.get("val")
    if not isinstance(values, (tuple, list)):
        return None
    signature = program.graph_signature
    if any(spec.kind not in _OUTPUTS_OR_OWN_STATE for spec in signature.output_specs):
        return None  # it writes into an input: the call does more than compute its outputs
    placeholders = {n.name: n for n in program.graph.nodes if n.op == "placeholder"}
    user_inputs = [placeholders[name] for name in signature.user_inputs]
    if len(user_inputs) != len(inputs) or not all(
        isinstance(arg, Node) and _same_value(arg, placeholder) and not getattr(arg.meta["val"], "requires_grad", False)
        for arg, placeholder in zip(inputs, user_inputs, strict=True)
    ):
        return None
    returned = next(n for n in reversed(program.graph.nodes) if n.op == "output").args[0]
    user_outputs = [out for out, spec in zip(returned, signature.output_specs, strict=True) if spec.kind == OutputKind.USER_OUTPUT]
    recorded = returned if len(values) == len(returned) else user_outputs
    if len(recorded) != len(values) or not all(
        isinstance(out, Node)
        and out.op != "placeholder"  # an output that is an input aliases it
        and isinstance(out.meta.get("val"), torch.Tensor)
        and (value is out.meta["val"] or value is _without_grad(out))
        and getattr(value, "constant", None) is None
        for out, value in zip(recorded, values, strict=True)
    ):
        return None
    if not all(computes_its_value(call) for call in program.graph.nodes if call.op == "call_function"):
        return None
    return [_without_grad(out) for out in user_outputs]


def _without_grad(out: Node) -> torch.Tensor:
    """`out`'s value as the kernel gives it: ExecuTorch runs a delegate without autograd (when no
    input requires grad), so an output whose recorded value requires grad (its program's nodes were
    traced with grad-requiring parameters) comes out detached: the same metadata, no grad. The
    detached value is kept on the node (beside the value it was made from), so every replay gets
    the same object and recognises it in the call's recorded value."""
    value: torch.Tensor = out.meta["val"]
    if not value.requires_grad:
        return value
    kept = getattr(out, _WITHOUT_GRAD_ATTR, None)
    if kept is None or kept[0] is not value:
        kept = (value, value.detach())
        setattr(out, _WITHOUT_GRAD_ATTR, kept)
    return kept[1]


def _same_value(a: Node, b: Node) -> bool:
    value: Any = a.meta.get("val")
    return value is not None and value is b.meta.get("val")
