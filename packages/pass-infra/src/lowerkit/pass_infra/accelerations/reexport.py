"""reexport: ExecuTorch's LLM builder re-exports a module it has not changed without re-tracing it.

``export_llama``'s ``LLMEdgeManager`` exports the model (strict ``torch.export.export``, then
``run_decompositions({})``), keeps ``program.module()``, and in ``to_edge_transform_and_lower``
exports that module again the same way: Dynamo and make_fx re-trace a graph that already is the
answer (about 2 s of an 8-layer Llama's Core ML export). When neither the module nor the program
changed since ``.module()`` made it (no pt2e quantization, no canonical pass), with the same
inputs and static shapes, `REEXPORT` builds the re-export's program from the first one: the same
graph, weights and signature, with what a strict re-trace of the module's code records:

* each weight's placeholder holds the copied fields of its last user in the module's graph: for
  a mutated buffer (the KV cache) the ``copy_`` that ``.module()`` writes it back with, which
  carries no metadata, so Dynamo's (its name, its operator, a call count);
* a call without ``source_fn_stack`` (export's ``_assert_tensor_metadata``) gets Dynamo's, and
  no call is marked as a view functionalization regenerated (the module writes back last);
* the nodes named as a trace names them (the gaps the first trace's dead-code elimination left
  close);
* the state dict in the module's parameter and buffer order, its non-persistent buffers as the
  constants, a module call graph entry per submodule (``named_modules``).

Any other module, or a graph holding calls of another kind, is re-exported as stock. The modules
remembered are dropped when the last scope closes. ``tests/pass_infra/test_reexport.py`` and the
live test (``tests/llm_export/test_llm_sameness.py``) compare the two with torch's.
"""

from __future__ import annotations

import logging
import weakref
from dataclasses import dataclass
from typing import Any

import torch
from torch.export import ExportedProgram
from torch.export.exported_program import ModuleCallEntry
from torch.export.graph_signature import InputKind
from torch.fx import Graph, GraphModule, Node

from lowerkit.pass_infra import _upstream
from lowerkit.pass_infra.accelerations import _upstream_reexport as upstream
from lowerkit.pass_infra.accelerations.deferred_recompile import plain_graph_module
from lowerkit.pass_infra.accelerations.lazy_copies import LAZY_COPIES
from lowerkit.pass_infra.accelerations.local_decomposition import renamed_call_graph, trace_names
from lowerkit.pass_infra.accelerations.patching import Patch, Replacement

__all__ = ["REEXPORT", "reexported"]

_COPIED = _upstream.COPY_META_FIELDS
#: What a call of the first trace holds (a view functionalization regenerated there does not:
#: the re-trace records it as any other call).
_TRACED = frozenset(("torch_fn", "original_aten", "from_node", "seq_nr"))
#: Copied fields a weight's placeholder does not take from its users (torch drops them).
_NOT_FOR_WEIGHTS = ("nn_module_stack", "custom")


@dataclass(frozen=True)
class _Origin:
    """The program a ``.module()`` was made from, and both graphs and the weights as they were then."""

    program: ExportedProgram
    state: tuple[Any, ...]


#: Each module ``ExportedProgram.module()`` made inside a scope, and where it came from (the
#: entry holds the module's graph, so it lives until the scope closes: `REEXPORT` clears it).
_ORIGINS: weakref.WeakKeyDictionary[GraphModule, _Origin] = weakref.WeakKeyDictionary()


def _state(program: ExportedProgram, module: GraphModule) -> tuple[Any, ...]:
    """What the re-export reads of both, held (so that a comparison by identity is sound)."""
    return (
        *(_graph_state(graph) for graph in (program.graph, module.graph)),
        tuple(module.named_parameters(remove_duplicate=False)),
        tuple(module.named_buffers(remove_duplicate=False)),
        tuple(name for name, _ in module.named_modules(remove_duplicate=False)),
        tuple(program.state_dict.items()),
        tuple(program.constants.items()),
    )


def _graph_state(graph: Graph) -> tuple[Any, ...]:
    return tuple((node, node.op, node.target, node.args, node.kwargs, *node.meta.items()) for node in graph.nodes)


def _identical(a: Any, b: Any) -> bool:
    """`a` and `b` hold the same objects (strings equal), nested tuples compared item by item."""
    if type(a) is tuple and type(b) is tuple:
        return len(a) == len(b) and all(_identical(x, y) for x, y in zip(a, b, strict=True))
    return a is b or (type(a) is str and type(b) is str and a == b)


def program_module(program: ExportedProgram, check_guards: bool = True) -> GraphModule:
    """``ExportedProgram.module``: stock's module, remembered with the program it came from."""
    module: GraphModule = upstream.STOCK_PROGRAM_MODULE(program, check_guards=check_guards)
    _ORIGINS[module] = _Origin(program, _state(program, module))
    return module


def reexported(module: GraphModule, args: Any, kwargs: Any, dynamic_shapes: Any) -> ExportedProgram | None:
    """What ``export(module, args, kwargs, dynamic_shapes=..., strict=True).run_decompositions({})``
    gives, when `module` is a ``.module()`` that can be re-exported without a trace; else None."""
    origin = _ORIGINS.get(module)
    if origin is None or dynamic_shapes is not None:
        return None
    program = origin.program
    if program.range_constraints or not _identical(origin.state, _state(program, module)):
        return None
    inputs = _upstream.pytree.tree_leaves((tuple(args), dict(kwargs or {})))
    if not _identical(tuple(inputs), tuple(_upstream.pytree.tree_leaves(program.example_inputs))):
        return None
    constants = upstream.non_persistent_buffers(module)
    if any(constants.get(name) is not value for name, value in program.constants.items()):
        return None  # a lifted tensor constant or a custom object: export keeps it otherwise
    kinds = (InputKind.USER_INPUT, InputKind.PARAMETER, InputKind.BUFFER)
    if any(spec.kind not in kinds for spec in program.graph_signature.input_specs):
        return None
    if not all(_replayable(node) for node in module.graph.nodes):
        return None
    return _from_first_export(program, module, constants)


def _replayable(node: Node) -> bool:
    """True for the nodes whose re-traced metadata `_from_first_export` knows: placeholders, the
    output, weights, calls that hold what a trace records (``source_fn_stack`` aside: export's
    ``_assert_tensor_metadata`` has none) and write nothing, and operator calls with no metadata
    (``.module()``'s buffer write-backs)."""
    if node.op in ("placeholder", "output"):
        return True
    if node.op == "get_attr":
        return True  # a weight: `module`'s graph has no nested graphs (below, every call is an operator)
    if node.op != "call_function" or isinstance(node.target, _upstream.HigherOrderOperator):
        return False
    operator_call = isinstance(node.target, _upstream.OpOverload)
    if not node.meta:
        return operator_call
    # a write before the write-backs would make the trace's functionalization replay views
    return _TRACED <= node.meta.keys() and not (operator_call and _upstream.is_mutating(node.target))


def _from_first_export(program: ExportedProgram, module: GraphModule, constants: dict[str, Any]) -> ExportedProgram:
    with LAZY_COPIES.scope():  # its code is made once, after the renaming (below)
        result = _upstream.copy_exported_program(program)
    fields = _retraced_fields(module, upstream.dynamo_call_names(module))
    by_name = {node.name: node for node in module.graph.nodes}
    weights = {spec.arg.name: spec.target for spec in result.graph_signature.input_specs if spec.kind != InputKind.USER_INPUT}
    users = _last_users_fields(module, fields)
    for node in result.graph.nodes:
        if node.op == "placeholder" and weights.get(node.name) in users:
            node.meta = _weight_meta(node.meta, users[weights[node.name]])
        elif node.op == "call_function":
            # the module's graph writes its buffers back after their last use: nothing is
            # regenerated after a mutation, as the first trace (of in-place writes) did
            node.meta.pop("is_functional_regenerated", None)
            if "source_fn_stack" not in node.meta:
                node.meta = _with_source_fn(node.meta, fields[by_name[node.name]]["source_fn_stack"])
    state_dict = dict(module.named_parameters(remove_duplicate=False))
    state_dict.update((name, b) for name, b in module.named_buffers(remove_duplicate=False) if name not in constants)
    upstream.set_weights(result, state_dict, dict(constants))
    # The re-trace names its calls afresh: the gaps the first trace's dead-code elimination left close.
    old_names = {node: node.name for node in result.graph.nodes}
    _upstream.rename_nodes(result.graph, trace_names(result, result.graph))
    plain_graph_module(result.graph_module)
    renamed = {old: node.name for node, old in old_names.items()}
    for spec in result.graph_signature.output_specs:
        spec.arg.name = renamed.get(spec.arg.name, spec.arg.name)
    entries = renamed_call_graph(program, renamed)[:1]  # the root's signature: the same call
    entries += [ModuleCallEntry(fqn, None) for fqn, _ in module.named_modules(remove_duplicate=False) if fqn]
    _upstream.set_module_call_graph(result, entries)
    return result


def _retraced_fields(module: GraphModule, names: dict[Node, str]) -> dict[Node, dict[str, Any]]:
    """The copied fields each call of `module`'s graph has in the re-trace: its own where it has
    them, Dynamo's where it has none."""
    calls: dict[Any, int] = {}
    fields: dict[Node, dict[str, Any]] = {}
    for node in module.graph.nodes:
        if node.op != "call_function":
            continue
        op = node.target
        calls[op] = calls.get(op, 0) + 1
        if node.meta:
            fields[node] = {f: node.meta[f] for f in _COPIED if f in node.meta}
            if "source_fn_stack" not in fields[node]:
                fields[node]["source_fn_stack"] = [(names[node], op)]
        else:
            fields[node] = {
                "torch_fn": (f"{op.__name__}_{calls[op]}", f"{type(op).__name__}.{op.__name__}"),
                "source_fn_stack": [(names[node], op)],
                "original_aten": op,
                "from_node": upstream.dynamo_provenance(names[node], op),
            }
    return fields


def _last_users_fields(module: GraphModule, fields: dict[Node, dict[str, Any]]) -> dict[str, dict[str, Any]]:
    """Per weight, its users' copied fields merged in graph order (torch's
    ``_collect_param_buffer_metadata``: the last user's win)."""
    users: dict[str, dict[str, Any]] = {}
    for node in module.graph.nodes:
        if node.op == "call_function":
            for arg in node.all_input_nodes:
                if arg.op == "get_attr":
                    assert isinstance(arg.target, str)
                    users.setdefault(arg.target, {}).update(
                        (f, v) for f, v in fields[node].items() if f not in _NOT_FOR_WEIGHTS
                    )
    return users


def _weight_meta(old: dict[str, Any], fields: dict[str, Any]) -> dict[str, Any]:
    meta: dict[str, Any] = {key: old[key] for key in ("val", "tensor_meta", "desc") if key in old}
    meta.update((f, fields[f]) for f in _COPIED if f in fields)
    meta.update((key, old[key]) for key in ("seq_nr", "example_value") if key in old)
    return meta


def _with_source_fn(old: dict[str, Any], source_fn_stack: list[Any]) -> dict[str, Any]:
    """`old` with ``source_fn_stack`` where a trace puts it: before the copied fields after it."""
    later = set(_COPIED[_COPIED.index("source_fn_stack") + 1 :]) | {"seq_nr"}
    items = list(old.items())
    at = next((i for i, (key, _) in enumerate(items) if key in later), len(items))
    items.insert(at, ("source_fn_stack", source_fn_stack))
    return dict(items)


def _builder_export(stock: Any) -> Any:
    def export(self: Any, module: torch.nn.Module | None = None) -> ExportedProgram:
        """``LLMEdgeManager._export``: a re-export of an unchanged ``.module()`` without a trace, else stock's."""
        if isinstance(module, GraphModule):
            program = reexported(
                module, self.example_inputs, self.example_kwarg_inputs, upstream.builder_dynamic_shapes(self)
            )
            if program is not None:
                logging.info("Re-exporting with:")  # stock's log
                logging.info(f"inputs: {self.example_inputs}")
                logging.info(f"kwargs: {self.example_kwarg_inputs}")
                logging.info("dynamic shapes: None")
                return program
        result: ExportedProgram = stock(self, module)
        return result

    return export


def _replacements() -> list[Replacement]:
    manager = upstream.llm_edge_manager()
    stock = vars(manager)[upstream.BUILDER_EXPORT]
    stock = getattr(stock, "__wrapped__", stock) if "lowerkit_patch" in getattr(stock, "__dict__", {}) else stock
    return [
        Replacement(ExportedProgram, "module", program_module),
        Replacement(manager, upstream.BUILDER_EXPORT, _builder_export(stock)),
    ]


#: ExecuTorch's LLM builder re-exports an unchanged ``.module()`` from its first export (held by
#: coreml-preprocess's ``accelerated_coreml_llm_export()``).
REEXPORT = Patch("lowerkit.pass_infra.accelerations.reexport", _replacements, on_uninstall=(_ORIGINS.clear,))
