"""Every reach into private torch / ExecuTorch names, and every copy of an upstream body.

A version bump of torch or ExecuTorch means re-reading this one file (and the functions
``tests/pass_infra_tests/test_upstream_sources.py`` names, whose source hashes it holds).
lowerkit's own replay logic is in `cheaper_replay` and `replay_engine`; it reaches upstream only through here.
Proven on torch 2.13.0 and ExecuTorch 1.5.1 (``lowerkit.pass_infra.accelerations.versions.PROVEN_ON``).
"""

from __future__ import annotations

import contextlib
import functools
from collections.abc import Callable, Iterator, KeysView
from contextlib import contextmanager
from typing import Any

import torch
import torch._library.utils as _library_utils
import torch._subclasses.fake_tensor as _fake_tensor
import torch.fx.experimental.proxy_tensor as _proxy_tensor
import torch.fx.proxy as _fx_proxy
import torch.fx.traceback as _fx_traceback
from executorch.exir import pass_base as _pass_base
from executorch.exir.dialects.edge._ops import EdgeOpOverload, EdgeOpOverloadPacket
from executorch.exir.pass_base import ExportPass, NodeMetadata, ProxyValue
from executorch.exir.program import _program as _exir_program
from torch._export import pass_base as _torch_pass_base
from torch._export.pass_infra.proxy_value import ProxyValue as _TorchProxyValue
from torch._ops import HigherOrderOperator, OpOverload, OpOverloadPacket
from torch._subclasses.fake_tensor import FakeTensor, FakeTensorMode
from torch.fx import Node
from torch.fx._lazy_graph_module import _LazyGraphModule, _use_lazy_graph_module
from torch.fx.graph import _PyTreeCodeGen
from torch.fx.immutable_collections import immutable_dict
from torch.fx.interpreter import Interpreter
from torch.fx.passes.infra.pass_base import PassResult
from torch.fx.traceback import NodeSource, NodeSourceAction
from torch.utils import _pytree as pytree

__all__ = [
    "ATTRIBUTE_NAMER",
    "COPY_META_FIELDS",
    "EXPORT_GRAPH_MODULE",
    "GEN_EDGE_MANAGER",
    "HISTOGRAM_SEARCH_METHOD",
    "LIFT_CONSTANT_TENSOR_PASS",
    "STOCK_RUN_DECOMPOSITIONS",
    "TORCH_SYM_OPS",
    "EdgeOpOverload",
    "EdgeOpOverloadPacket",
    "ExportPass",
    "ExportPassBase",
    "FakeTensor",
    "FakeTensorMode",
    "LazyGraphModule",
    "NodeMetadata",
    "OpOverload",
    "OpOverloadPacket",
    "ProxyValue",
    "SpecKeepingLazyGraphModule",
    "StockInterpreter",
    "TorchExportPassBase",
    "TorchProxyValue",
    "aot_input_descriptor",
    "append_call_node",
    "attribute_namer_users",
    "bypass_entry_type",
    "cache_key_func",
    "copy_exported_program",
    "create_node_hooks_of",
    "current_meta",
    "current_seq_nr",
    "dead_code_impure_random",
    "decomposes_by_itself",
    "direct_copy_possible",
    "dispatched_arguments",
    "eager_input_vals",
    "edge_op_aten",
    "edge_to_backend_body",
    "edge_verifier_context",
    "edge_verifier_inputs",
    "executorch_call_delegate",
    "exir_program_module",
    "exported_program_module",
    "extract_symbolic_snapshot",
    "fake_cache",
    "fake_cache_module",
    "fake_mode_of",
    "fake_state_snapshot",
    "functional_variant",
    "fx_code_loader",
    "fx_graph_module_module",
    "fx_traceback_module",
    "has_cia_kernel",
    "higher_order_call_error",
    "histogram_observer_class",
    "histogram_quantization_error",
    "inlined_higher_order_ops",
    "is_mutating",
    "is_operator",
    "lazy_call_submodule",
    "lazy_export_graph_module",
    "lazy_graph_modules",
    "library_utils",
    "module_node_source",
    "needs_eager_input_vals",
    "new_namespace",
    "outside_fake_mode",
    "overrides_set_current_node",
    "own_attribute_names",
    "partitioner_dependency_viewer",
    "preservable_cia",
    "pytree",
    "qualified_op_name",
    "recorded_value_arg_validator",
    "register_scope",
    "rename_nodes",
    "rename_without_collisions",
    "replay_run_node",
    "replay_state_snapshot",
    "returns_alias",
    "returns_nothing",
    "set_module_call_graph",
    "shared_current_meta",
    "shared_node_source",
    "signature_argument_classes",
    "signature_input_views",
    "stock_capture_snapshots",
    "stock_create_arg",
    "stock_gen_edge_manager",
    "stock_is_builtin",
    "stock_lift_constant_tensor_pass",
    "stock_run_node",
    "stock_set_cache_key",
    "stock_set_cache_key_for_shape_env",
    "stock_set_metadata",
    "stock_torch_fx",
    "stock_torch_set_metadata",
    "stock_validate_cache_key",
    "stock_validate_snapshots",
    "target_to_str",
    "tensor_metadata",
    "trace_candidate_name",
    "user_io_program",
    "validate_symbolic_snapshots",
    "xnnpack_pattern_passes",
]

# --------------------------------------------------------------------------- names

#: ExecuTorch's private base class of ExportPass (where run_node and call live).
ExportPassBase: Any = _pass_base._ExportPassBase
#: torch's own copy of that base (``torch._export.pass_base``), which ExecuTorch's edge stage
#: runs ``ReplaceViewOpsWithViewCopyOpsPass`` on.
TorchExportPassBase: Any = _torch_pass_base._ExportPassBaseDeprecatedDoNotUse
#: Its unpatched ``_fx`` (which also records unbacked-symbol bindings after a dispatch).
stock_torch_fx: Callable[..., Any] = TorchExportPassBase._fx
stock_torch_set_metadata: Callable[..., Any] = TorchExportPassBase.ExportTracer.set_metadata
#: torch's copy of ExecuTorch's ProxyValue (what `TorchExportPassBase` passes hand around).
TorchProxyValue: Any = _TorchProxyValue
#: The symbolic-math callables ExportInterpreter routes to ``call_sym``.
TORCH_SYM_OPS: frozenset[Any] = frozenset(_pass_base._TORCH_SYM_OPS)
#: ExportPass's interpreter class (whose run_node the cheaper replay replaces).
StockInterpreter: Any = ExportPassBase.ExportInterpreter
#: The unpatched ``ExportInterpreter.run_node`` (the reference replay).
stock_run_node: Callable[[Any, Node], Any] = StockInterpreter.run_node
_stock_set_current_node = Interpreter._set_current_node
stock_set_metadata: Callable[..., Any] = ExportPassBase.ExportTracer.set_metadata
stock_create_arg: Callable[..., Any] = ExportPass.ExportTracer.create_arg
#: Stock's snapshot of an input value's symbolic sizes (None when it has none).
extract_symbolic_snapshot: Callable[[Any], Any] = _pass_base._extract_symbolic_snapshot
stock_validate_snapshots: Callable[..., Any] = ExportPassBase._validate_symbolic_input_snapshots
stock_capture_snapshots: Callable[..., Any] = ExportPassBase._capture_symbolic_input_snapshots
#: torch's lazily code-generating GraphModule.
LazyGraphModule: Any = _LazyGraphModule


class SpecKeepingLazyGraphModule(_LazyGraphModule):
    """torch's `LazyGraphModule` whose ``recompile()`` still sets what stock's sets besides the code.

    torch's lazy ``recompile()`` only marks the code stale, so a module whose graph has pytree
    codegen (``ExportedProgram.module()``'s) lacks the ``_in_spec`` / ``_out_spec`` that
    ``run_decompositions`` and strict export read off it (torch's own TODO, T207713214). This one
    sets them as ``GraphModule.recompile`` does, then marks the code stale.
    """

    def recompile(self) -> None:  # a classmethod on torch's class
        if isinstance(self._graph._codegen, _PyTreeCodeGen):
            self._in_spec = self._graph._codegen.pytree_info.in_spec
            self._out_spec = self._graph._codegen.pytree_info.out_spec
        type(self).forward = type(self)._lazy_forward


#: ExecuTorch's program module: `GEN_EDGE_MANAGER` (the first half of
#: ``to_edge_transform_and_lower``) is looked up in it per call.
exir_program_module: Any = _exir_program
GEN_EDGE_MANAGER = "_gen_edge_manager_for_partitioners"
stock_gen_edge_manager: Callable[..., Any] = _exir_program._gen_edge_manager_for_partitioners
#: ``to_edge``'s lift of tensor constants to placeholders (in place), looked up in it per call.
LIFT_CONSTANT_TENSOR_PASS = "lift_constant_tensor_pass"
stock_lift_constant_tensor_pass: Callable[..., Any] = _exir_program.lift_constant_tensor_pass

#: ``EdgeProgramManager.to_backend``'s own body: its ``et_logger`` stub wrapper keeps no
#: ``__wrapped__`` (the source hashes read it here).
edge_to_backend_body: Any = next(
    cell.cell_contents
    for cell in _exir_program.EdgeProgramManager.to_backend.__closure__ or ()
    if getattr(cell.cell_contents, "__qualname__", "") == "EdgeProgramManager.to_backend"
)


#: torch.ao's (and torchao's copy) factory of fresh-attribute-name functions, a global of its users.
ATTRIBUTE_NAMER = "get_new_attr_name_with_prefix"


def attribute_namer_users() -> list[Any]:
    """The modules whose observers, scales and zero points pt2e names with `ATTRIBUTE_NAMER`:
    torch.ao's prepare (``_insert_obs_or_fq``) and torchao's pt2e utils (``create_getattr_from_value``)."""
    import importlib

    # import_module: ``torch.ao.quantization.fx.prepare`` is also a function of that package.
    return [importlib.import_module(name) for name in ("torch.ao.quantization.fx.prepare", "torchao.quantization.pt2e.utils")]


def own_attribute_names(module: torch.nn.Module) -> tuple[KeysView[str], KeysView[str]]:
    """Live views of the names `module` holds as submodules and as buffers (its own dicts)."""
    return module._modules.keys(), module._buffers.keys()


def lazy_graph_modules() -> Any:
    """torch's switch (a context manager) under which its tracers build `LazyGraphModule`s."""
    return _use_lazy_graph_module(True)

#: The node-meta fields torch's tracer copies from the current meta onto a new node.
COPY_META_FIELDS: tuple[str, ...] = tuple(_fx_proxy._COPY_META_FIELDS)

# FakeTensor's dispatch cache (patched by fake_cache.FAKE_CACHE).
library_utils: Any = _library_utils
fake_cache_module: Any = _fake_tensor
stock_is_builtin: Callable[[Any], bool] = _library_utils.is_builtin
stock_validate_cache_key: Callable[..., Any] = FakeTensorMode._validate_cache_key
stock_set_cache_key: Callable[..., Any] = _fake_tensor._set_cache_key
stock_set_cache_key_for_shape_env: Callable[..., Any] = _fake_tensor._set_cache_key_for_shape_env
#: The class of FakeTensor's negative cache entries ("this op cannot be cached").
bypass_entry_type: type = _fake_tensor._DispatchCacheBypassEntry


def signature_input_views() -> dict[str, Callable[[Any], Any]]:
    """``ExportGraphSignature``'s input-name lookups (property name -> its stock getter).

    Each builds a fresh read-only dict from ``self.input_specs`` alone, on every access:
    (kind, arg, target) of each spec, the arg's type and name.
    """
    from torch.export.graph_signature import ExportGraphSignature

    names = ("inputs_to_parameters", "inputs_to_buffers", "inputs_to_lifted_tensor_constants")
    return {name: vars(ExportGraphSignature)[name].fget for name in names}


def signature_argument_classes() -> tuple[type, ...]:
    """``InputSpec`` and every argument class an input spec can hold (the mutable state those lookups read)."""
    from torch.export import graph_signature as gs

    return (
        gs.InputSpec, gs.TensorArgument, gs.SymIntArgument, gs.SymFloatArgument, gs.SymBoolArgument,
        gs.ConstantArgument, gs.CustomObjArgument, gs.TokenArgument,
    )  # fmt: skip


def is_operator(value: Any) -> bool:
    """True for torch / ExecuTorch operator objects (overloads, packets, higher-order ops)."""
    return isinstance(
        value,
        OpOverload | OpOverloadPacket | HigherOrderOperator | EdgeOpOverload | EdgeOpOverloadPacket,
    )


def edge_op_aten(op: EdgeOpOverload) -> Any:
    """The ATen operator an edge operator calls (``EdgeOpOverload.__call__`` is ``self._op(...)``)."""
    return op._op


def qualified_op_name(packet: Any) -> str:
    """An op packet's ``namespace::name``."""
    return str(packet._qualified_op_name)


def target_to_str(graph: torch.fx.Graph, target: Any) -> str:
    """The base node name torch's Graph derives from a call target."""
    return str(graph._target_to_str(target))


def cache_key_func(key: Any) -> Any:
    """The operator a FakeTensor dispatch-cache key was made for."""
    return key.key[0]


def validate_symbolic_snapshots(pass_: Any, old: Any, new: Any) -> None:
    """``_ExportPassBase._validate_symbolic_input_snapshots`` of `pass_`."""
    pass_._validate_symbolic_input_snapshots(old, new)


def create_node_hooks_of(graph: torch.fx.Graph) -> Any:
    """The owning module's create-node hooks (None when there are none)."""
    owner = graph.owning_module
    return None if owner is None else getattr(owner, "_create_node_hooks", None)


# ------------------------------------------------------------------ provenance (copies)


def shared_node_source(node: Node, pass_name: str) -> NodeSource:
    """``NodeSource(node, pass_name, CREATE)`` whose chain shares, not deep-copies, the old one.

    Equal (``==``, ``to_dict()``) to what torch builds; the chain's NodeSource objects
    are immutable in practice, so sharing them is safe and skips the deep copy.
    """
    source = NodeSource(None, pass_name, NodeSourceAction.CREATE)
    source.node_info = NodeSource.NodeInfo(
        name=node.name, target=str(node.target), graph_id=id(node.graph)
    )
    chain = node.meta.get("from_node")
    source.from_node = list(chain) if chain is not None else []
    return source


@contextmanager
def shared_current_meta(node: Node, pass_name: str) -> Iterator[None]:
    """Copy of `torch.fx.traceback.set_current_meta` without deep-copying the provenance chain."""
    if _fx_traceback.should_preserve_node_meta and node.meta:
        saved = _fx_traceback.current_meta
        try:
            current = node.meta.copy()
            current["from_node"] = [shared_node_source(node, pass_name)]
            _fx_traceback.current_meta = current
            yield
        finally:
            _fx_traceback.current_meta = saved
    else:
        yield


def direct_copy_possible(tracer: Any, old: dict[str, Any], target: Any) -> bool:
    """Whether ``TracerBase.create_node`` would derive nothing beyond `old` (a node's meta).

    That holds with node meta preserved, no mutation checks, a recorded seq_nr, no autograd
    or replay state, eager input values recorded if the op gets them (the tracer's own are
    replaced by the recorded ones, as the replay updates the new meta with the old) and a
    usable stack trace.
    """
    if (
        not old
        or not _fx_traceback.should_preserve_node_meta
        or tracer.check_mutable_operations
        or "seq_nr" not in old
        or old.get("in_grad_fn", 0)
        or old.get("autograd_backward", False)
        or _fx_traceback.get_current_replay_node() is not None
        or (needs_eager_input_vals(target) and "eager_input_vals" not in old)
    ):
        return False
    stack = old.get("stack_trace")
    if stack and _fx_traceback.GRADIENT_ACC_SPECIAL_STACK in stack:
        return False
    return not (not stack and tracer.record_stack_traces)


_EAGER_INPUT_VALS: dict[Any, bool] = {}


def needs_eager_input_vals(target: Any) -> bool:
    """``proxy_tensor._should_save_eager_input_vals(target, None)``, cached per target."""
    try:
        return _EAGER_INPUT_VALS[target]
    except KeyError:
        needs = bool(_proxy_tensor._should_save_eager_input_vals(target, None))
        _EAGER_INPUT_VALS[target] = needs
        return needs


def append_call_node(
    graph: torch.fx.Graph,
    target: Any,
    args: tuple[Any, ...],
    kwargs: dict[str, Any],
    name: str | None,
) -> Node:
    """Copy of ``Graph.create_node("call_function", ...)`` minus its raw-SymInt scan of the args.

    That scan only warns; a copied node's args are those of a node already in a graph
    (already scanned), with nodes swapped for nodes. Everything else is as in torch.
    """
    if not kwargs:
        kwargs = immutable_dict()
    candidate = name if name is not None else graph._target_to_str(target)
    name = graph._graph_namespace.create_name(candidate, None)
    node = Node(graph, name, "call_function", target, args, kwargs, None)
    hooks = create_node_hooks_of(graph)
    if hooks is not None:
        for hook in hooks:
            hook(node)
    graph._graph_namespace.associate_name_with_obj(name, node)
    graph._insert(node)
    graph._find_nodes_lookup_table.insert(node)
    graph._len += 1
    return node


def register_scope(tracer: Any, node: Node) -> None:
    """What ``TracerBase.create_node`` records of the tracer's module scope for a new node."""
    tracer.node_name_to_scope[node.name] = (tracer.scope.module_path, tracer.scope.module_type)


# ------------------------------------------------------------------ replay (copies)


def replay_run_node(
    interpreter: Any, n: Node, defer_debug_str: Callable[[Any, Node], None], pass_name: str
) -> Any:
    """Copy of ``ExportInterpreter.run_node`` + ``Interpreter.run_node``, minus thrown-away work.

    The provenance chain is shared, not deep-copied, and ``node_debug_str`` is handed to
    `defer_debug_str` instead of formatted. Only for interpreters whose
    ``_set_current_node`` is torch's (see `overrides_set_current_node`).
    """
    interpreter.node = n
    defer_debug_str(interpreter.callback, n)
    if n.op == "placeholder" and type(interpreter.callback).placeholder in _STOCK_PLACEHOLDERS:
        # The base's placeholder() replaces the new node's metadata with the old node's, so what
        # create_node derives from the current node's (copies of its fields, seq_nr, stack trace)
        # is thrown away: not derived.
        with _node_meta_not_preserved():
            return interpreter.placeholder(n.target, *interpreter.fetch_args_kwargs_from_env(n))
    with shared_current_meta(n, pass_name):
        args, kwargs = interpreter.fetch_args_kwargs_from_env(n)
        if not isinstance(args, tuple):
            raise AssertionError(f"Expected args to be tuple, got {type(args)}")
        if not isinstance(kwargs, dict):
            raise AssertionError(f"Expected kwargs to be dict, got {type(kwargs)}")
        return getattr(interpreter, n.op)(n.target, args, kwargs)


#: ExecuTorch's and torch's ``ExportPass`` base ``placeholder()``: a node whose metadata is the old node's.
_STOCK_PLACEHOLDERS = (_pass_base._ExportPassBase.placeholder, _torch_pass_base._ExportPassBaseDeprecatedDoNotUse.placeholder)


@contextmanager
def _node_meta_not_preserved() -> Iterator[None]:
    """Within the block torch's tracers derive no node metadata (``fx_traceback.preserve_node_meta`` off)."""
    saved = _fx_traceback.should_preserve_node_meta
    _fx_traceback.should_preserve_node_meta = False
    try:
        yield
    finally:
        _fx_traceback.should_preserve_node_meta = saved


def overrides_set_current_node(interpreter: Any) -> bool:
    """True when the interpreter's class replaces torch's ``Interpreter._set_current_node``."""
    return type(interpreter)._set_current_node is not _stock_set_current_node


_DUMMY_INTERPRETER: list[Interpreter] = []


def _dummy_interpreter() -> Interpreter:
    # ExportPass only calls the stateless call_function / output of this interpreter.
    if not _DUMMY_INTERPRETER:
        _DUMMY_INTERPRETER.append(
            Interpreter(torch.fx.GraphModule(torch.nn.Module(), torch.fx.Graph()))
        )
    return _DUMMY_INTERPRETER[0]


def lazy_call_submodule(
    self: Any,
    graph_module: Any,
    inputs: Any,
    data_of: Callable[[Any], Any],
    validate: Callable[[Any, Any, Any], None] | None,
) -> Any:
    """Copy of ``_ExportPassBase.call_submodule`` building a _LazyGraphModule.

    Stock generates and compiles Python code for every replayed graph, and the next pass
    replays the graph node by node without ever running that code. It also builds an
    empty GraphModule for a throwaway interpreter per call; one is shared here. `data_of`
    maps the inputs' ProxyValues to their data; `validate` is the symbolic-input check.
    With `validate` None it is torch's copy of the method (`TorchExportPassBase`), which
    neither validates nor copies the graph module's ``meta``.
    """
    prev_tracer, self.tracer = self.tracer, self.ExportTracer(self, graph_module.graph._codegen)
    self.tracer.fake_tensor_mode = prev_tracer.fake_tensor_mode
    interpreter = self.ExportInterpreter(self, graph_module)
    prev_interpreter, self.interpreter = self.interpreter, _dummy_interpreter()
    inputs_data = data_of(inputs)
    with _fx_traceback.preserve_node_meta():
        interpreter.run(*inputs_data)
    new_graph_module = _LazyGraphModule(self.tracer.root, self.tracer.graph)
    if validate is not None:
        validate(self, graph_module, new_graph_module)
        new_graph_module.meta = graph_module.meta.copy()
    self.tracer = prev_tracer
    self.interpreter = prev_interpreter
    return PassResult(new_graph_module, True)


def current_meta() -> Any:
    """torch.fx.traceback's current node meta (for tests of exact restoration)."""
    return _fx_traceback.current_meta


def fake_cache() -> dict[Any, Any]:
    """FakeTensor's global dispatch cache."""
    cache: dict[Any, Any] = FakeTensorMode.cache
    return cache


# --------------------------------------------------------------- snapshots (for tests)


def fake_state_snapshot() -> dict[str, Any]:
    """What FakeTensor's global cache state is now (for tests of exact restoration)."""
    return {
        "is_builtin": _library_utils.is_builtin,
        "_validate_cache_key": vars(FakeTensorMode)["_validate_cache_key"],
        "_set_cache_key": _fake_tensor._set_cache_key,
        "_set_cache_key_for_shape_env": _fake_tensor._set_cache_key_for_shape_env,
        "cache": dict(FakeTensorMode.cache),
    }


def replay_state_snapshot() -> dict[str, Any]:
    """What the patched ExportPass attributes are now (for tests of exact restoration)."""
    return {
        "run_node": vars(StockInterpreter)["run_node"],
        "_fx": vars(ExportPassBase)["_fx"],
        "call_submodule": vars(ExportPassBase)["call_submodule"],
        "set_metadata": vars(ExportPassBase.ExportTracer)["set_metadata"],
        "create_arg": vars(ExportPass.ExportTracer)["create_arg"],
        "node_debug_str": vars(ExportPassBase).get("node_debug_str"),
        "current_meta": _fx_traceback.current_meta,
    }


# ------------------------------------------------------- backend pattern passes (XNNPACK)


def xnnpack_pattern_passes() -> list[tuple[type, tuple[Any, ...], Callable[[], Any]]]:
    """XNNPACK's pattern-matching passes: (pass class, ops every pattern holds, pattern getter).

    ``ConvertToUpsampleBilinear2d`` and ``ConvertToSDPAPass`` build their pattern graphs
    (``torch.export`` + ``to_edge`` of small modules, ~20 s per process) and then match them
    with ``SubgraphMatcher``. The ops listed are in every pattern (a test checks this live);
    empty when the XNNPACK backend cannot be imported.
    """
    try:
        from executorch.backends.xnnpack._passes.convert_to_sdpa import ConvertToSDPAPass
        from executorch.backends.xnnpack._passes.convert_to_upsample_bilinear2d import (
            ConvertToUpsampleBilinear2d,
        )
        from executorch.backends.xnnpack.partition.graphs import bilinear_2d, sdpa
        from executorch.exir.dialects._ops import ops as exir_ops
    except ImportError:  # pragma: no cover - the executorch wheel ships XNNPACK
        return []
    edge = exir_ops.edge.aten
    return [
        (ConvertToUpsampleBilinear2d, (edge.upsample_bilinear2d.vec,), bilinear_2d.get_graphs),
        (ConvertToSDPAPass, (edge.bmm.default, edge._softmax.default), sdpa.get_graphs),
    ]


def exported_program_module() -> Any:
    """``torch.export.exported_program``, which looks ``_override_composite_implicit_decomp`` and
    `EXPORT_GRAPH_MODULE` (in ``ExportedProgram.__init__``) up by name."""
    import torch.export.exported_program as ep

    return ep


def fx_graph_module_module() -> Any:
    """``torch.fx.graph_module``, whose ``_method_from_src`` looks up ``_exec_with_source`` per call."""
    import torch.fx.graph_module

    return torch.fx.graph_module


def fx_code_loader() -> Any:
    """torch.fx's ``_loader``: it gives each compiled source its file name and linecache entry."""
    import torch.fx.graph_module

    return torch.fx.graph_module._loader


def partitioner_dependency_viewer() -> type:
    """torch's ``_DependencyViewer``, the reachability ``CapabilityBasedPartitioner`` builds."""
    from torch.fx.passes.infra import partitioner

    return partitioner._DependencyViewer


def fx_traceback_module() -> Any:
    """``torch.fx.traceback``, whose ``set_current_meta`` torch's Interpreter looks up per node."""
    return _fx_traceback


def histogram_observer_class() -> type:
    """torchao's ``HistogramObserver`` (the activation observer of ExecuTorch's Arm and XNNPACK quantizers)."""
    from torchao.quantization.pt2e.observer import HistogramObserver

    return HistogramObserver


#: The HistogramObserver method `histogram_search` replaces.
HISTOGRAM_SEARCH_METHOD = "_non_linear_param_search"


def histogram_quantization_error(observer: Any, start_bin: int, end_bin: int) -> float:
    """The observer's own L2 error of quantizing its histogram to bins ``start_bin..end_bin``."""
    return float(observer._compute_quantization_error(start_bin, end_bin))


def dead_code_impure_random() -> bool:
    """The ``impure_random`` that ``Graph.eliminate_dead_code`` hands ``Node.is_impure``: True, or
    inductor's ``fallback_random`` inside a tracing context (its own test, as it makes it)."""
    impure_random = True
    if torch._guards.TracingContext.try_get():
        impure_random = torch._inductor.config.fallback_random
    return bool(impure_random)


#: torch's own ``ExportedProgram.run_decompositions`` (taken at import: before any lowerkit scope).
STOCK_RUN_DECOMPOSITIONS = torch.export.ExportedProgram.run_decompositions


#: The function ``ExportedProgram.__init__`` builds its graph module with (a global of its module).
EXPORT_GRAPH_MODULE = "_create_graph_module_for_export"


def lazy_export_graph_module(root: Any, graph: torch.fx.Graph) -> Any:
    """``_create_graph_module_for_export`` building a _LazyGraphModule (its code made on first use)."""
    return _LazyGraphModule(root, graph)


def copy_exported_program(program: torch.export.ExportedProgram) -> torch.export.ExportedProgram:
    """`program` with its own graph module (nodes copied, metadata dicts shallow-copied) and signature.

    Weights (in a new mapping), constants and the example inputs are shared, as
    ``run_decompositions`` shares them.
    """
    import copy

    graph = copy.deepcopy(program.graph)
    for source, copied in zip(program.graph.nodes, graph.nodes, strict=True):
        # Graph copies rename nodes that shadow builtins (nn.Sequential's `input` -> `input_1`); a
        # re-trace keeps the signature's names, so keep them too.
        if copied.name != source.name:
            copied.name = source.name
    graph_module = exported_program_module()._create_graph_module_for_export(program.graph_module, graph)
    # Its own state-dict mapping (the same tensors), as run_decompositions gives: lowering
    # removes delegated weights from it, which must not reach the caller's program.
    state_dict = dict(program.state_dict)
    return program._update(graph_module, copy.deepcopy(program.graph_signature), state_dict=state_dict)


def is_mutating(op: OpOverload) -> bool:
    """True when the operator's schema mutates an argument (in-place or out= variants)."""
    return bool(op._schema.is_mutable)


def new_namespace() -> Any:
    """An empty fx name space, as a new graph's (names handed out as ``Graph.create_node`` does)."""
    return torch.fx.graph._Namespace()


def trace_candidate_name(graph: torch.fx.Graph, target: Any) -> str:
    """The name proxy_tensor's trace asks for a call to `target` (before de-duplication)."""
    packet = target.overloadpacket if isinstance(target, OpOverload) else target
    return graph._target_to_str(packet.__name__)


def rename_without_collisions(
    name_map: dict[str, str], find_available: Any, used: set[str], old: str, new: str, is_placeholder: bool = False
) -> None:
    """export's placeholder naming step for one node (``torch._export.utils._rename_without_collisions``)."""
    from torch._export.utils import _rename_without_collisions

    _rename_without_collisions(name_map, find_available, used, old, new, is_placeholder=is_placeholder)


def rename_nodes(graph: torch.fx.Graph, names: dict[Node, str]) -> None:
    """Give `graph`'s nodes `names` at once (swaps allowed) and a name space holding exactly those,
    as a graph copy's has."""
    for node, name in names.items():
        node.name = name
    namespace = new_namespace()
    for node in graph.nodes:
        namespace.create_name(node.name, node)
    graph._graph_namespace = namespace


def user_io_program(
    module: torch.fx.GraphModule, inputs: list[Node], outputs: list[Node], verifiers: Any
) -> torch.export.ExportedProgram:
    """An ExportedProgram of `module` whose placeholders are all user inputs and whose outputs (a tuple) user outputs."""
    from torch.export.exported_program import ModuleCallEntry, ModuleCallSignature
    from torch.export.graph_signature import (
        ExportGraphSignature,
        InputKind,
        InputSpec,
        OutputKind,
        OutputSpec,
        TensorArgument,
    )
    from torch.fx.graph import _PyTreeCodeGen, _PyTreeInfo

    in_spec = pytree.tree_flatten((tuple(range(len(inputs))), {}))[1]
    out_spec = pytree.tree_flatten(tuple(range(len(outputs))))[1]
    module.graph._codegen = _PyTreeCodeGen(_PyTreeInfo([node.name for node in inputs], in_spec, out_spec))
    module.recompile()
    signature = ExportGraphSignature(
        input_specs=[InputSpec(InputKind.USER_INPUT, TensorArgument(node.name), None) for node in inputs],
        output_specs=[OutputSpec(OutputKind.USER_OUTPUT, TensorArgument(node.name), None) for node in outputs],
    )
    call = ModuleCallSignature(inputs=[], outputs=[], in_spec=in_spec, out_spec=out_spec)
    return torch.export.ExportedProgram(
        root=module,
        graph=module.graph,
        graph_signature=signature,
        state_dict={},
        range_constraints={},
        module_call_graph=[ModuleCallEntry("", call)],
        example_inputs=None,
        verifiers=verifiers,
    )


def set_module_call_graph(program: torch.export.ExportedProgram, call_graph: Any) -> None:
    """Replace `program`'s module call graph (it has no public setter)."""
    program._module_call_graph = call_graph


def current_seq_nr() -> int:
    """The ``seq_nr`` proxy_tensor's tracer gives a forward node now (``torch.fx.proxy._get_seq_nr``)."""
    return int(torch.autograd._get_sequence_nr()) - 1


def fake_mode_of(values: list[Any]) -> Any:
    """The one FakeTensorMode of the FakeTensors in `values` (nested), or None (none, or several)."""
    modes = {id(v.fake_mode): v.fake_mode for v in pytree.tree_leaves(values) if isinstance(v, FakeTensor)}
    return next(iter(modes.values())) if len(modes) == 1 else None


def tensor_metadata(value: Any) -> Any:
    """``meta["tensor_meta"]`` of a node whose ``meta["val"]`` is `value`, as a trace records it."""
    from torch.fx.passes.shape_prop import _extract_tensor_metadata

    return _extract_tensor_metadata(value)


def eager_input_vals(node: Node) -> Any:
    """``meta["eager_input_vals"]`` as proxy_tensor's tracer records it for `node`."""

    def value_of(arg: Any) -> Any:
        if not isinstance(arg, Node) or not isinstance(arg.meta.get("val"), FakeTensor):
            return None
        return _proxy_tensor.extract_val(arg.meta["val"])

    return torch.fx.node.map_aggregate((node.args, node.kwargs), value_of)


def aot_input_descriptor(kind: Any, target: str | None, user_index: int) -> Any:
    """The AOT input descriptor a trace gives a placeholder (``meta["desc"]``)."""
    from torch._functorch._aot_autograd.descriptors import (
        BufferAOTInput,
        ParamAOTInput,
        PlainAOTInput,
    )
    from torch.export.graph_signature import InputKind

    if kind == InputKind.PARAMETER:
        return ParamAOTInput(target)
    if kind == InputKind.BUFFER:
        return BufferAOTInput(target)
    return PlainAOTInput(user_index)


def module_node_source(node: Node) -> NodeSource:
    """The provenance a re-trace's output node traces back to: `node` as ``ExportedProgram.module()`` made it."""
    return NodeSource(node, "ExportedProgram.module()", NodeSourceAction.CREATE)


def dispatched_arguments(op: OpOverload, args: tuple[Any, ...], kwargs: dict[str, Any]) -> tuple[tuple[Any, ...], dict[str, Any]]:
    """(args, kwargs) of a call of `op` as the dispatcher hands them to a Python mode, and so as
    proxy_tensor's tracer records them (positional up to the last one not defaulted, keyword-only
    ones not defaulted as kwargs). The call is captured, not run."""
    from torch.utils._python_dispatch import TorchDispatchMode

    captured: list[tuple[tuple[Any, ...], dict[str, Any]]] = []

    class _Capture(TorchDispatchMode):
        def __torch_dispatch__(self, func: Any, types: Any, args: Any = (), kwargs: Any = None) -> Any:
            captured.append((tuple(args), dict(kwargs or {})))

    with _Capture():
        op(*args, **kwargs)
    return captured[0]


@functools.cache
def decomposes_by_itself(op: OpOverload) -> bool:
    """True when a trace may record something else for `op` whatever the table: it has a
    CompositeImplicitAutograd kernel, or returns a view (functionalization's business)."""
    has_cia = torch._C._dispatch_has_kernel_for_dispatch_key(op.name(), "CompositeImplicitAutograd")
    return bool(has_cia) or any(ret.alias_info is not None for ret in op._schema.returns)


@functools.cache
def functional_variant(op: OpOverload) -> OpOverload | None:
    """The operator functionalization records for in-place aten `op` (``relu_`` -> ``relu``), or None.

    torchgen pairs an in-place operator with the one of the same name without the trailing ``_``
    and the same overload; the argument types must match, aliasing aside, and only the first be
    written.
    """
    if not _library_utils.mutates_and_returns_first_arg(op):
        return None
    if any(
        arg.alias_info is not None and arg.alias_info.is_write for arg in op._schema.arguments[1:]
    ):
        return None
    packet_name = op._schema.name.split("::")[-1]
    if not packet_name.endswith("_") or packet_name.startswith("_"):
        return None
    packet = getattr(torch.ops.aten, packet_name[:-1], None)
    functional = getattr(packet, op._overloadname, None) if packet is not None else None
    if not isinstance(functional, OpOverload):
        return None
    schema = functional._schema
    if [str(a.type) for a in schema.arguments] != [str(a.type) for a in op._schema.arguments]:
        return None  # names may differ (dropout_'s self, dropout's input)
    if len(schema.returns) != 1 or schema.returns[0].alias_info is not None or schema.is_mutable:
        return None
    return functional


@functools.cache
def returns_alias(op: Any) -> bool:
    """True when one of `op`'s results may alias an argument (views, in-place and out= operators),
    or `op` has no schema to say it does not (a Python function such as ``operator.getitem``)."""
    schema = getattr(op, "_schema", None)
    return schema is None or any(ret.alias_info is not None for ret in schema.returns)


@functools.cache
def returns_nothing(op: OpOverload) -> bool:
    """True when `op`'s schema returns nothing (``-> ()``: ``_assert_tensor_metadata``)."""
    return not op._schema.returns


@functools.cache
def executorch_call_delegate() -> Any:
    """ExecuTorch's delegate call operator (``executorch.exir.delegate``)."""
    from executorch.exir.delegate import executorch_call_delegate as call_delegate

    return call_delegate


def outside_fake_mode() -> contextlib.AbstractContextManager[Any]:
    """A context in which no FakeTensorMode takes operator calls (``unset_fake_temporarily``):
    for computing on a FakeTensor's real ``constant``."""
    from torch._subclasses.fake_tensor import unset_fake_temporarily

    return unset_fake_temporarily()


@functools.cache
def inlined_higher_order_ops() -> frozenset[HigherOrderOperator]:
    """The higher-order operators every trace inlines: their ``__call__`` runs the nested graph as
    plain Python under a grad or autocast mode (``torch._higher_order_ops.wrap``), so a re-trace
    records the graph's operators, not the call. ``@torch.no_grad()`` methods export to one."""
    from torch._higher_order_ops.wrap import wrap_with_autocast, wrap_with_set_grad_enabled

    return frozenset({wrap_with_set_grad_enabled, wrap_with_autocast})


@functools.cache
def has_cia_kernel(op: OpOverload) -> bool:
    """True when `op` has a CompositeImplicitAutograd kernel."""
    return bool(
        torch._C._dispatch_has_kernel_for_dispatch_key(op.name(), "CompositeImplicitAutograd")
    )


@functools.cache
def preservable_cia(op: OpOverload) -> bool:
    """True when ``run_decompositions`` keeps CompositeImplicitAutograd `op` as it is unless its
    table decomposes it (``torch._export.utils._is_preservable_cia_op``: functional, not aliasing)."""
    from torch._export.utils import _is_preservable_cia_op

    return bool(_is_preservable_cia_op(op))


# ------------------------------------------------------------- the edge verifier's argument check

#: The name ExecuTorch's edge verifier calls its dtype check by (a global of its module).
ARGUMENT_CHECK = "_check_tensor_args_matching_op_allowed_dtype"


def edge_verifier_module() -> Any:
    """``executorch.exir.verification.verifier``, whose ``check_additional`` looks `ARGUMENT_CHECK` up by name."""
    import executorch.exir.verification.verifier as verifier

    return verifier


def edge_verifier_inputs(graph_module: torch.fx.GraphModule) -> list[Any]:
    """The placeholder values the edge verifier's dtype check runs its graph on (``_get_inputs``)."""
    return list(edge_verifier_module()._get_inputs(graph_module))


@functools.cache
def recorded_value_arg_validator() -> type:
    """ExecuTorch's ``EdgeOpArgValidator`` (the dtype check's Interpreter), its checks verbatim,
    with each call's result taken from the node's recorded ``meta["val"]`` instead of running it.

    The validator checks a call, then hands it to ``super().call_function``; here that is
    `_RecordedValues` (next in this class's method order), which asks ``recorded_value(node, run)``
    (``EdgeOpArgValidator.run_node`` sets ``self.node``; ``run()`` runs the call as stock does).
    """
    from executorch.exir.verification.arg_validator import EdgeOpArgValidator

    class _RecordedValues(Interpreter):
        node: Node

        def call_function(self, target: Any, args: Any, kwargs: Any) -> Any:
            return self.recorded_value(self.node, lambda: super(_RecordedValues, self).call_function(target, args, kwargs))

        def recorded_value(self, node: Node, run: Callable[[], Any]) -> Any:
            """`node`'s value for the rest of the check (set by `passes_on_recorded_values`)."""
            raise NotImplementedError

    class RecordedValueArgValidator(EdgeOpArgValidator, _RecordedValues):
        pass

    return RecordedValueArgValidator


def edge_verifier_context(graph_module: torch.fx.GraphModule) -> Any:
    """The context the edge verifier's dtype check runs its graph in: the graph's fake mode, python dispatcher."""
    from torch._dispatch.python import enable_python_dispatcher

    stack = contextlib.ExitStack()
    stack.enter_context(enable_python_dispatcher())
    stack.enter_context(edge_verifier_module()._detect_fake_mode_from_gm(graph_module) or contextlib.nullcontext())
    return stack


def higher_order_call_error() -> type[Exception]:
    """What ``EdgeOpArgValidator`` raises on a delegate call (the stock check stops there and passes)."""
    from executorch.exir.verification.arg_validator import RunHigherOrderOperatorError

    return RunHigherOrderOperatorError
