"""Layout transposes of an Arm lowering, split into delegate-boundary and internal ones.

ExecuTorch's Arm backend computes in NHWC while torch programs are NCHW, so its pipeline adds
TOSA TRANSPOSEs: at the delegate's inputs and outputs (``NormalizeDelegateIOLayoutPass`` and
the layout passes, NCHW <-> NHWC once per tensor crossing the boundary) and inside the graph
(around ops that work on another axis, e.g. a LayerNorm over channels). The boundary ones are
the price of the model's interface (feed NHWC, or a channel count of 1, and they go away); the
internal ones come from the model's own ops. The same split is made for permutes left on the
CPU: next to a delegate call, or between CPU ops.
"""

from __future__ import annotations

import operator
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from executorch.exir.delegate import executorch_call_delegate

from lowerkit.pass_infra.helpers import graph_ops

__all__ = ["LayoutTransposes", "layout_transposes"]

#: Ops that only move data between layouts: TOSA's TRANSPOSE, ATen's permute / transpose.
_LAYOUT_OPS = ("TRANSPOSE", "permute", "transpose")
#: CPU ops a tensor may pass through between a permute and the delegate (its I/O conversions).
_PASS_THROUGH = ("quantize_per_tensor", "dequantize_per_tensor")


@dataclass(frozen=True)
class LayoutTransposes:
    """Node names of the layout transposes, by where they run and where they sit."""

    #: In the delegate (TOSA TRANSPOSE), reading a delegate input or writing a delegate output.
    delegate_boundary: tuple[str, ...] = ()
    #: In the delegate, between two of its own ops.
    delegate_internal: tuple[str, ...] = ()
    #: On the CPU (outside the delegate), feeding a delegate call or fed by one.
    cpu_boundary: tuple[str, ...] = ()
    #: On the CPU, between CPU ops.
    cpu_internal: tuple[str, ...] = ()

    def counts(self) -> dict[str, int]:
        """How many of each kind."""
        return {name: len(getattr(self, name)) for name in self.__dataclass_fields__}


def _is_layout(node: Any) -> bool:
    return node.op == "call_function" and any(word in graph_ops.op_name(node.target) for word in _LAYOUT_OPS)


def _name(node: Any) -> str:
    return graph_ops.op_name(node.target) if node.op == "call_function" else ""


def _split_delegate(program: Any) -> tuple[list[str], list[str]]:
    user_inputs = set(program.graph_signature.user_inputs)
    boundary: list[str] = []
    internal: list[str] = []
    for node in program.graph_module.graph.nodes:
        if not _is_layout(node):
            continue
        source = node.args[0]
        reads_input = getattr(source, "op", None) == "placeholder" and source.name in user_inputs
        writes_output = bool(node.users) and all(user.op == "output" for user in node.users)
        (boundary if reads_input or writes_output else internal).append(node.name)
    return boundary, internal


def _touches_delegate(node: Any) -> bool:
    """The permute's input comes from a delegate output, or its output goes only to delegates
    (either through the quantize / dequantize conversions at the delegate's I/O)."""
    source: Any = node.args[0] if node.args else None
    while getattr(source, "op", None) == "call_function" and any(w in _name(source) for w in _PASS_THROUGH):
        source = source.args[0]
    if getattr(source, "target", None) is operator.getitem:
        source = source.args[0]
    if getattr(source, "target", None) is executorch_call_delegate:
        return True
    pending, seen = list(node.users), set()
    while pending:
        user = pending.pop()
        if user in seen:
            continue
        seen.add(user)
        if user.target is executorch_call_delegate:
            continue
        if user.op == "call_function" and any(w in _name(user) for w in _PASS_THROUGH):
            pending.extend(user.users)
            continue
        return False
    return bool(seen)


def layout_transposes(lowered_program: Any, tosa_programs: Iterable[Any]) -> LayoutTransposes:
    """Classify the transposes of a lowered program (CPU side) and of its TOSA partitions' programs."""
    delegate_boundary: list[str] = []
    delegate_internal: list[str] = []
    for program in tosa_programs:
        boundary, internal = _split_delegate(program)
        delegate_boundary += boundary
        delegate_internal += internal
    cpu_boundary: list[str] = []
    cpu_internal: list[str] = []
    for node in lowered_program.graph_module.graph.nodes:
        if _is_layout(node):
            (cpu_boundary if _touches_delegate(node) else cpu_internal).append(node.name)
    return LayoutTransposes(
        tuple(delegate_boundary), tuple(delegate_internal), tuple(cpu_boundary), tuple(cpu_internal)
    )
