"""REEXPORT's upstream access (see `reexport`): ExecuTorch's LLM builder, and the private parts of
torch's export and fx it reads or sets. The replaced functions' sources are hashed in
``tests/pass_infra_tests/test_upstream_sources.py``.
"""

from __future__ import annotations

from typing import Any

import torch
from torch.export import ExportedProgram
from torch.fx import Graph, GraphModule, Node
from torch.fx.traceback import NodeSource, NodeSourceAction

__all__ = [
    "BUILDER_EXPORT",
    "STOCK_PROGRAM_MODULE",
    "builder_dynamic_shapes",
    "dynamo_call_names",
    "dynamo_provenance",
    "llm_edge_manager",
    "non_persistent_buffers",
    "set_weights",
]

#: torch's own ``ExportedProgram.module`` (taken at import: before any lowerkit scope).
STOCK_PROGRAM_MODULE = ExportedProgram.module

#: The method of ExecuTorch's ``LLMEdgeManager`` that exports (strict) and decomposes (``{}``).
BUILDER_EXPORT = "_export"


def llm_edge_manager() -> type:
    """ExecuTorch's LLM builder class (``export_llama``'s ``LLMEdgeManager``)."""
    from executorch.extension.llm.export.builder import LLMEdgeManager

    return LLMEdgeManager


def builder_dynamic_shapes(manager: Any) -> Any:
    """The dynamic shapes `manager` (an ``LLMEdgeManager``) exports with (None: static)."""
    return manager._get_dynamic_shape()


def non_persistent_buffers(module: torch.nn.Module) -> dict[str, torch.Tensor]:
    """`module`'s non-persistent buffers by qualified name (export's own set of them), in
    ``named_buffers`` order: what export puts in ``constants``."""
    from torch.export._trace import _get_non_persistent_buffers

    names = _get_non_persistent_buffers(module)
    return {name: buffer for name, buffer in module.named_buffers(remove_duplicate=False) if name in names}


def dynamo_call_names(module: GraphModule) -> dict[Node, str]:
    """The name Dynamo's graph gives each call of `module`'s graph when it re-traces the module's
    code: from the operator's qualified name (``copy__default``), de-duplicated in graph order."""
    namespace = torch.fx.graph._Namespace()
    names = {}
    for node in module.graph.nodes:
        if node.op == "call_function":
            target = node.target
            if isinstance(target, torch._ops.OpOverload):
                qualified = f"{target.overloadpacket.__name__}.{target._overloadname}"
            else:
                qualified = getattr(target, "__name__", str(target))
            names[node] = namespace.create_name(module.graph._target_to_str(qualified), None)
    return names


def dynamo_provenance(name: str, target: Any) -> list[NodeSource]:
    """``from_node`` of a call Dynamo's graph made itself (named `name`): created there, then
    re-created by export's unbacked-symbol propagation."""
    node = Graph().call_function(target, ())
    node.name = name
    node.meta["from_node"] = [NodeSource(node, "Interpreter_DynamoGraphTransformer", NodeSourceAction.CREATE)]
    return [NodeSource(node, "Interpreter_PropagateUnbackedSymInts", NodeSourceAction.CREATE)]


def set_weights(program: ExportedProgram, state_dict: dict[str, Any], constants: dict[str, Any]) -> None:
    """Replace `program`'s state dict and constants (they have no public setters)."""
    program._state_dict = state_dict
    program._constants = constants
