"""run_decompositions without the whole-program re-trace when the re-trace would change nothing.

``to_edge_transform_and_lower`` calls ``ExportedProgram.run_decompositions`` three times for a
partitioner that keeps ops from decomposing (Arm, XNNPACK, Core ML): functionalize, decompose,
and once more after swapping the kept ops for placeholder ops; each call re-traces the whole
program through AOTAutograd (~2 s for a 9-layer CNN). The last call often has nothing to do.

`needs_retrace` says when a program may skip it: it was returned by a ``run_decompositions``
call in this scope (so it is functional, inference IR); it has no op the table decomposes, no
mutating op, getitem, nested graph, dead node, input or buffer mutation, symbolic shape or
effect token; and its nodes and weight placeholders already carry the ``original_aten`` a
re-trace gives them. The result is then a copy of the program (its own graph and signature,
the same weights) given what a trace records per node: ``original_aten`` (the node's op, as
nothing decomposes) and, for stride-sensitive ops, ``eager_input_vals``. It has the graph code,
node names and metadata of the re-trace, except that ``from_node`` provenance chains lack the
re-trace's two layers; their roots, from which ExecuTorch derives debug handles, are the same
(ExecuTorch's own skip of this call, for partitioners without placeholder ops, leaves the same
chains). Tests compare both on the zoo; the Arm and XNNPACK sameness tests compare the lowered
programs and ``.pte`` bytes with stock's.
"""

from __future__ import annotations

import operator
import weakref
from typing import Any

from torch.export import ExportedProgram
from torch.fx import Node

from lowerkit.pass_infra import _upstream
from lowerkit.pass_infra.local_decomposition import decompose_locally, record_as_traced
from lowerkit.pass_infra.patching import Patch, Replacement

__all__ = ["RETRACE_SKIP", "needs_retrace", "retrace_plan", "run_decompositions"]

#: Programs returned by a ``run_decompositions`` call while the patch was installed.
_DECOMPOSED: weakref.WeakSet[ExportedProgram] = weakref.WeakSet()


def needs_retrace(program: ExportedProgram, decomp_table: Any) -> str | None:
    """Why `program` must be re-traced for `decomp_table`, or None when the re-trace changes nothing."""
    blocker, decomposing = retrace_plan(program, decomp_table)
    if blocker is None and decomposing:
        return f"{decomposing[0].target} decomposes"
    return blocker


def retrace_plan(program: ExportedProgram, decomp_table: Any) -> tuple[str | None, list[Node]]:
    """(why `program` needs a whole re-trace for `decomp_table`, or None; the nodes the table decomposes)."""
    if decomp_table is None:
        return "the default table", []
    if program not in _DECOMPOSED:
        return "not decomposed in this scope", []
    signature = program.graph_signature
    if signature.buffers_to_mutate or signature.user_inputs_to_mutate or signature.input_tokens:
        return "mutations or effect tokens", []
    if program.range_constraints:
        return "symbolic shapes", []
    if any(True for _ in program.graph_module.named_children()):
        return "nested graphs", []
    table = set(decomp_table)
    decomposing: list[Node] = []
    for node in program.graph.nodes:
        if node.op in ("placeholder", "output"):
            continue
        if node.op != "call_function":
            return f"{node.op} node {node.name}", []
        target = node.target
        if target is operator.getitem:
            return f"multi-output node {node.name} (a re-trace rebuilds getitem metadata)", []
        if not isinstance(target, _upstream.OpOverload):
            return f"{target} is not an operator", []
        if _upstream.is_mutating(target):
            return f"{target} mutates", []
        if not node.users:
            return f"dead node {node.name}", []
        if "original_aten" not in node.meta:
            return f"{node.name} lacks original_aten", []
        if target in table:
            decomposing.append(node)
    return None, decomposing


def run_decompositions(
    self: ExportedProgram, decomp_table: Any = None, decompose_custom_triton_ops: bool = False
) -> ExportedProgram:
    """``ExportedProgram.run_decompositions`` without the whole re-trace where `retrace_plan` allows:
    a copy when nothing decomposes, `decompose_locally` when some nodes do."""
    result: ExportedProgram | None = None
    blocker, decomposing = (
        ("custom triton ops", []) if decompose_custom_triton_ops else retrace_plan(self, decomp_table)
    )
    if blocker is None and not decomposing:
        result = _upstream.copy_exported_program(self)
        record_as_traced(self, result)
    elif blocker is None:
        result = decompose_locally(self, decomp_table, decomposing)
    if result is None:
        result = _upstream.STOCK_RUN_DECOMPOSITIONS(self, decomp_table, decompose_custom_triton_ops)
    _DECOMPOSED.add(result)
    return result


#: Held by ``accelerated_lowering()``.
RETRACE_SKIP = Patch(
    "lowerkit.pass_infra.retrace_skip",
    lambda: [Replacement(ExportedProgram, "run_decompositions", run_decompositions)],
)
