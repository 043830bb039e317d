"""run_decompositions without the whole-program re-trace.

``to_edge_transform_and_lower`` calls ``ExportedProgram.run_decompositions`` three times for a
partitioner that keeps ops from decomposing (Arm, XNNPACK, Core ML): functionalize, decompose the
partitioner's table, and once more after swapping the kept ops for placeholder ops. Each call
re-traces the whole program through AOTAutograd (~1.5-2 s for a 9-layer quantized CNN, 774
nodes) to change a few nodes: 19 reshapes become views, then 9 conv2d become convolutions, then
nothing.

`retrace_plan` says which programs may do without: no mutating op but in-place ones on an
intermediate that nothing else reads afterwards (not a view, no view of it before or after), no getitem but
one per output of an operator, user-input mutation, symbolic shape or effect token (the buffer
mutations a functional program returns, a KV cache's, stay: a trace returns them again), no
nested graph but the bodies of calls a trace inlines (``@torch.no_grad()`` methods export to
``wrap_with_set_grad_enabled``), every other call an operator. It lists
the nodes a trace might record differently: the table's ops, CompositeImplicitAutograd ops
it does not keep (it keeps the functional ones the table does not name), and nodes
whose operator is not the one their last trace recorded (ExecuTorch swaps kept ops for
``EDGE_DO_NOT_DECOMP`` ones in place, and tracing those annotates their metadata), and the
inlined calls with their nested graphs.
`local_decomposition.decompose_locally` re-traces those alone and gives the rest what a trace
records. Graph code, node names, signature and metadata are the re-trace's, except that
``from_node`` provenance chains lack the re-trace's layers (their roots, from which ExecuTorch
derives debug handles, are the same). Tests compare both on the zoo; the Arm and XNNPACK
sameness tests compare lowered programs and ``.pte`` bytes; ``tools/golden/decompositions.py``
compares both on every run_decompositions of ExecuTorch's operator suite.
"""

from __future__ import annotations

import contextlib
import logging
import operator
import threading
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import torch
from torch.export import ExportedProgram
from torch.fx import Node

from lowerkit.pass_infra import _upstream
from lowerkit.pass_infra.accelerations import local_decomposition
from lowerkit.pass_infra.accelerations.local_decomposition import (
    decompose_locally,
    emulation_blocker,
    inlined_bodies,
    is_multi_output,
    is_output_getitem,
    output_getitems,
    written_buffer,
)
from lowerkit.pass_infra.accelerations.patching import Patch, Replacement
from lowerkit.pass_infra.accelerations.replay_engine import vouch_graph

__all__ = [
    "RETRACE_SKIP",
    "DecompositionFallback",
    "decomposition_fallbacks",
    "needs_retrace",
    "retrace_plan",
    "run_decompositions",
]

_LOG = logging.getLogger(__name__)
_SINKS = threading.local()


@dataclass(frozen=True)
class DecompositionFallback:
    """One ``run_decompositions`` that took torch's whole-program re-trace, and why."""

    reason: str
    #: Call nodes of the program re-traced.
    nodes: int


@contextlib.contextmanager
def decomposition_fallbacks() -> Iterator[list[DecompositionFallback]]:
    """Yield a list that gets every whole-program re-trace lowerkit's ``run_decompositions`` falls back to in this thread.

    An empty list after the block means every ``run_decompositions`` inside it stayed local.
    Each fallback is also logged (``lowerkit.pass_infra.accelerations.retrace_skip``, INFO).
    """
    sink: list[DecompositionFallback] = []
    previous = getattr(_SINKS, "sinks", ())
    _SINKS.sinks = (*previous, sink)
    try:
        yield sink
    finally:
        _SINKS.sinks = previous


def _record_fallback(program: ExportedProgram, reason: str) -> None:
    nodes = sum(1 for node in program.graph.nodes if node.op == "call_function")
    _LOG.info("run_decompositions re-traces the whole program (%d nodes): %s", nodes, reason)
    fallback = DecompositionFallback(reason, nodes)
    for sink in getattr(_SINKS, "sinks", ()):
        sink.append(fallback)


def needs_retrace(program: ExportedProgram, decomp_table: Any) -> str | None:
    """Why ``program.run_decompositions(decomp_table)`` must re-trace the whole program, or None."""
    blocker, _ = retrace_plan(program, decomp_table)
    return blocker or emulation_blocker(program)


def retrace_plan(program: ExportedProgram, decomp_table: Any) -> tuple[str | None, list[Node]]:
    """(why `program` needs a whole re-trace for `decomp_table`, or None; the nodes to re-trace alone)."""
    if decomp_table is None:
        return "the default table", []
    signature = program.graph_signature
    if signature.user_inputs_to_mutate or signature.input_tokens:
        return "user-input mutations or effect tokens", []
    if program.range_constraints:
        return "symbolic shapes", []
    bodies = inlined_bodies(program.graph)
    kept = sorted(name for name, _ in program.graph_module.named_children() if name not in bodies)
    if kept:
        return f"nested graphs a trace keeps ({', '.join(kept)})", []
    table = set(decomp_table)
    decomposing: list[Node] = []
    position = {node: index for index, node in enumerate(program.graph.nodes)}
    decomposed_outputs: set[Node] = set()  # multi-output nodes that decompose
    for node in program.graph.nodes:
        if node.op in ("placeholder", "output") or (node.op == "get_attr" and node.target in bodies):
            continue
        if node.op != "call_function":
            return f"{node.op} node {node.name}", []
        target = node.target
        if target in _upstream.inlined_higher_order_ops():
            # the trace records its nested graph's operators: re-traced with the call
            decomposing.append(node)
            if is_multi_output(node):
                decomposed_outputs.add(node)
            continue
        if target is operator.getitem:
            producer, index = node.args[0], node.args[1]
            if not (is_output_getitem(node) and isinstance(producer, Node) and isinstance(index, int)):
                return f"{node.name} is not a getitem of an operator's output", []
            if output_getitems(producer)[index] is not node:
                return f"{node.name} is a second getitem of {producer.name}'s output {index}", []
            if producer in decomposed_outputs:
                decomposing.append(node)  # the small program's output for that output
            continue
        if not isinstance(target, _upstream.OpOverload):
            return f"{target} is not an operator", []
        if _upstream.is_mutating(target):
            buffer = written_buffer(node, signature)
            if buffer is not None:
                if signature.buffers_to_mutate:
                    return f"{node.name} writes {buffer.name} in a program that returns buffer values already", []
                blocker = _buffer_write_blocker(node, buffer, position, table)
                if blocker is not None:
                    return blocker, []
                continue  # given what functionalization records (`local_decomposition._return_buffer_writes`)
            blocker = _in_place_blocker(node, position)
            if blocker is not None:
                return blocker, []
            if _upstream.has_cia_kernel(target):
                # decomposed before functionalization (dropout_ returns its input in eval): re-traced
                decomposing.append(node)
                continue
            target = _upstream.functional_variant(target)
        decomposes = target in table or _retargeted(node) or _decomposes_by_itself(target, node)
        if decomposes:
            decomposing.append(node)
            if is_multi_output(node):
                decomposed_outputs.add(node)
    return None, decomposing


def _buffer_write_blocker(node: Node, buffer: Node, position: dict[Node, int], table: set[Any]) -> str | None:
    """Why in-place call `node`, writing `buffer` (a KV cache update), cannot be given what
    functionalization records, or None.

    Functionalization records the out-of-place operator, re-points the call's readers at its
    result and returns that as the buffer's new value; a ``copy_`` of a value of the buffer's
    own shape, dtype and layout (how ``ExportedProgram.module()`` writes mutated buffers back)
    records nothing, and the value copied is the new one. That is all it does when the call is
    the buffer's only write and last reader, its result has no view, the out-of-place operator
    does not decompose, and a ``copy_``'s result is not read.
    """
    target = node.target
    assert isinstance(target, _upstream.OpOverload)
    for user in buffer.users:
        if user is not node and position[user] > position[node]:
            return f"{target} writes {buffer.name}, which {user.name} reads afterwards"
    if target is torch.ops.aten.copy_.default:
        source = node.args[1]
        if node.users or len(node.args) != 2 or node.kwargs or not isinstance(source, Node):
            return f"{node.name} copies into {buffer.name} otherwise than writing a buffer back"
        if _tensor_type(source) != _tensor_type(buffer):
            return f"{node.name} converts {source.name} to write {buffer.name}"
        return None
    functional = _upstream.functional_variant(target)
    if functional is None or _upstream.has_cia_kernel(target):
        return f"{target} writes {buffer.name}"
    if functional in table or _decomposes_by_itself(functional, node):
        return f"{target} writes {buffer.name} and its out-of-place operator decomposes"
    return _viewed_result(node)


def _tensor_type(node: Node) -> Any:
    value = node.meta.get("val")
    if not isinstance(value, torch.Tensor):
        return None
    return value.shape, value.dtype, value.device, value.stride()


def _in_place_blocker(node: Node, position: dict[Node, int]) -> str | None:
    """Why in-place call `node` cannot be given its functional operator as a trace would, or None.

    Functionalization records the out-of-place operator and re-points every later reader of the
    mutated tensor at its result. That is the call's own users, only if the mutated tensor is an
    intermediate (not an input), not a view of another tensor, has no view (before the call or
    after it), and no other reader after the call.
    """
    target = node.target
    assert isinstance(target, _upstream.OpOverload)
    functional = _upstream.functional_variant(target)
    if functional is None:
        return f"{target} mutates"
    if _upstream.has_cia_kernel(target):
        # re-traced in the small program, whose own signature says if it mutated (then refused)
        return None
    mutated = node.args[0]
    if not isinstance(mutated, Node) or mutated.op != "call_function":
        return f"{target} mutates an input ({mutated})"
    producer = mutated.target
    if is_output_getitem(mutated):
        producer = mutated.args[0].target
    if not isinstance(producer, _upstream.OpOverload):
        return f"{target} mutates the result of {producer}"
    if _upstream.returns_alias(producer) and _upstream.functional_variant(producer) is None:
        return f"{target} mutates a view ({mutated.name})"
    for user in mutated.users:
        if user is node:
            continue
        if position[user] > position[node]:
            return f"{target} mutates {mutated.name}, which {user.name} reads afterwards"
        if isinstance(user.target, _upstream.OpOverload) and _upstream.returns_alias(user.target):
            return f"{target} mutates {mutated.name}, of which {user.name} is a view"
    return _viewed_result(node)


def _viewed_result(node: Node) -> str | None:
    """Why in-place call `node`'s result cannot be re-pointed as is: a view of it taken after the
    call, which a trace records again where a non-view first reads it, with that reader's
    provenance and a later name (ConvNeXt's ``x += shortcut``, then LayerNorm2d's permute)."""
    for user in node.users:
        if _is_view(user):
            return f"{node.target}'s result {node.name} has a view ({user.name}), which a trace records where it is read"
    return None


def _is_view(node: Node) -> bool:
    """Whether `node` calls an operator whose result aliases its input without mutating it (a view)."""
    target = node.target
    return (
        isinstance(target, _upstream.OpOverload)
        and _upstream.returns_alias(target)
        and not _upstream.is_mutating(target)
    )


def _decomposes_by_itself(op: Any, node: Node) -> bool:
    """Whether a trace may record something else for `op` that the table does not decompose: a
    CompositeImplicitAutograd op ``run_decompositions`` does not keep, or a view whose operator is
    not the one its last trace recorded. Functionalization records a view as that view again,
    whether a trace recorded it already or ``torch.export`` just did (its training IR)."""
    if not _upstream.decomposes_by_itself(op) or _upstream.preservable_cia(op):
        return False
    return _upstream.has_cia_kernel(op) or node.target is not op or _retargeted(node)


def _retargeted(node: Node) -> bool:
    """Whether `node`'s operator is not the one its last trace recorded (``original_aten``).

    By name: a trace records an OpOverload object of the same operator that is not always the
    one ``torch.ops`` gives (and that the graph holds), so identity would list every traced node.
    """
    original = node.meta.get("original_aten")
    if original is None or original is node.target:
        return False
    if isinstance(original, _upstream.OpOverload):
        return original.name() != node.target.name()
    return True


def run_decompositions(
    self: ExportedProgram, decomp_table: Any = None, decompose_custom_triton_ops: bool = False
) -> ExportedProgram:
    """``ExportedProgram.run_decompositions``, re-tracing only what `retrace_plan` lists where it can."""
    result: ExportedProgram | None = None
    if decompose_custom_triton_ops:
        blocker: str | None = "decompose_custom_triton_ops"
    else:
        blocker, decomposing = retrace_plan(self, decomp_table)
        if blocker is None:
            result = decompose_locally(self, decomp_table, decomposing)
            if result is None:
                blocker = local_decomposition.last_refusal() or "the local decomposition refused"
    if result is None:
        _record_fallback(self, blocker or "")
        result = _upstream.STOCK_RUN_DECOMPOSITIONS(self, decomp_table, decompose_custom_triton_ops)
    # Every value in a traced program is what its op gives its inputs: the next replay may reuse them.
    vouch_graph(result.graph_module)
    return result


#: Held by ``accelerated_lowering()``.
RETRACE_SKIP = Patch(
    "lowerkit.pass_infra.accelerations.retrace_skip",
    lambda: [Replacement(ExportedProgram, "run_decompositions", run_decompositions)],
)
