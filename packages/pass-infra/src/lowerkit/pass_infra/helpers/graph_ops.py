"""op_name and cpu_ops: which operators a lowered program runs outside its delegates."""

from __future__ import annotations

import operator
from collections.abc import Callable
from typing import Any

__all__ = ["cpu_ops", "delegate_payloads", "op_name"]


def op_name(target: Any) -> str:
    """An operator's schema name, e.g. ``aten::sort`` (edge and ATen ops alike)."""
    name = getattr(target, "_name", None) or getattr(target, "__name__", None) or str(target)
    return str(name)


def cpu_ops(program: Any, *, ignore: Callable[[Any], bool] | None = None) -> tuple[str, ...]:
    """Sorted schema names of the ops a lowered program runs on the CPU.

    Delegate calls and ``getitem`` are not ops; `ignore(node)` drops more (e.g. the quantize /
    dequantize conversions at a delegate's inputs and outputs).
    """
    from executorch.exir.delegate import executorch_call_delegate

    ops: set[str] = set()
    for node in program.graph_module.graph.nodes:
        if node.op != "call_function" or node.target in (executorch_call_delegate, operator.getitem):
            continue
        if ignore is not None and ignore(node):
            continue
        ops.add(op_name(node.target))
    return tuple(sorted(ops))


def delegate_payloads(program: Any, backend_id: str) -> list[bytes]:
    """The processed bytes of each delegate of `backend_id` in a lowered program, in order."""
    from executorch.exir.lowered_backend_module import LoweredBackendModule

    return [
        bytes(child.processed_bytes)
        for _, child in program.graph_module.named_children()
        if isinstance(child, LoweredBackendModule) and child.backend_id == backend_id
    ]
