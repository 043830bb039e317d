"""Every reach into private torch / executorch names, and every patch of them.

A version bump of torch or executorch means re-reading this one file. Each patch is
an explicit (owner, attribute, replacement) triple applied by `Patch.apply` and undone
by `Patch.restore`; callers hold them only inside context managers that restore on
exit, exceptions included.
"""

from __future__ import annotations

import threading
import weakref
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
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
from torch._ops import OpOverload, OpOverloadPacket
from torch._subclasses.fake_tensor import FakeTensor, FakeTensorMode
from torch.fx import Node
from torch.fx._lazy_graph_module import _LazyGraphModule
from torch.fx.immutable_collections import immutable_dict as _immutable_dict
from torch.fx.immutable_collections import immutable_list as _immutable_list
from torch.fx.interpreter import Interpreter
from torch.fx.passes.infra.pass_base import PassResult
from torch.fx.traceback import NodeSource, NodeSourceAction
from torch.utils import _pytree as pytree

__all__ = [
    "TORCH_SYM_OPS",
    "EdgeOpOverload",
    "EdgeOpOverloadPacket",
    "ExportPassBase",
    "FakeTensor",
    "FakeTensorMode",
    "NodeMetadata",
    "OpOverload",
    "OpOverloadPacket",
    "Patch",
    "ProxyValue",
    "applied",
    "cache_key_func",
    "cheap_replay_patches",
    "copy_node_direct",
    "extract_symbolic_snapshot",
    "fake_cache_patches",
    "fake_state_snapshot",
    "in_pipeline",
    "is_bypass_entry",
    "is_vouched",
    "map_proxy_values",
    "pipeline_running",
    "plainly_static",
    "pytree",
    "realize",
    "replay_state_snapshot",
    "shared_current_meta",
    "shared_node_source",
    "stock_run_node",
    "validate_symbolic_inputs",
    "vouch_graph",
    "vouch_node",
]

#: executorch's private base class of ExportPass (where run_node and call live).
ExportPassBase: Any = _pass_base._ExportPassBase
#: The symbolic-math callables ExportInterpreter routes to ``call_sym``.
TORCH_SYM_OPS: frozenset[Any] = frozenset(_pass_base._TORCH_SYM_OPS)
_StockInterpreter: Any = ExportPassBase.ExportInterpreter
#: The unpatched ``ExportInterpreter.run_node`` (the reference replay).
stock_run_node: Callable[[Any, Node], Any] = _StockInterpreter.run_node
_stock_set_current_node = Interpreter._set_current_node


# --------------------------------------------------------------------------- patches


@dataclass
class Patch:
    """A set of attribute replacements that can be applied and exactly undone."""

    replacements: list[tuple[Any, str, Any]]
    _saved: list[tuple[Any, str, bool, Any]] = field(default_factory=list)
    on_restore: list[Callable[[], None]] = field(default_factory=list)

    def apply(self) -> None:
        """Install the replacements, remembering what was there (or that nothing was)."""
        if self._saved:
            raise RuntimeError("patch applied twice without restore")
        for owner, name, value in self.replacements:
            present = name in vars(owner) if isinstance(owner, type) else hasattr(owner, name)
            old = (
                vars(owner)[name]
                if isinstance(owner, type) and present
                else getattr(owner, name, None)
            )
            self._saved.append((owner, name, present, old))
            setattr(owner, name, value)

    def restore(self) -> None:
        """Put back exactly what `apply` replaced, in reverse order; run restore hooks."""
        try:
            for hook in self.on_restore:
                hook()
        finally:
            saved, self._saved = self._saved, []
            for owner, name, present, old in reversed(saved):
                if present:
                    setattr(owner, name, old)
                else:
                    delattr(owner, name)


def is_operator(value: Any) -> bool:
    """True for torch / ExecuTorch operator objects (overloads, packets, higher-order ops)."""
    return isinstance(
        value,
        torch._ops.OpOverload
        | torch._ops.OpOverloadPacket
        | torch._ops.HigherOrderOperator
        | EdgeOpOverload
        | EdgeOpOverloadPacket,
    )


@contextmanager
def applied(patch: Patch) -> Iterator[None]:
    """Apply `patch` for the duration of the block."""
    patch.apply()
    try:
        yield
    finally:
        patch.restore()


# --------------------------------------------------------------------------- provenance


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
    """`torch.fx.traceback.set_current_meta` without deep-copying the provenance chain."""
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


_COPY_META_FIELDS: tuple[str, ...] = tuple(_fx_proxy._COPY_META_FIELDS)
_EAGER_INPUT_VALS: dict[Any, bool] = {}


def _needs_eager_input_vals(target: Any) -> bool:
    try:
        return _EAGER_INPUT_VALS[target]
    except KeyError:
        needs = bool(_proxy_tensor._should_save_eager_input_vals(target, None))
        _EAGER_INPUT_VALS[target] = needs
        return needs


def _append_call_node(
    graph: torch.fx.Graph,
    target: Any,
    args: tuple[Any, ...],
    kwargs: dict[str, Any],
    name: str | None,
) -> Node:
    """``Graph.create_node("call_function", ...)`` minus its raw-SymInt scan of the args.

    That scan only warns; a copied node's args are those of a node already in a graph
    (already scanned), with nodes swapped for nodes. Everything else is as in torch.
    """
    if not kwargs:
        kwargs = _immutable_dict()
    candidate = name if name is not None else graph._target_to_str(target)
    name = graph._graph_namespace.create_name(candidate, None)
    node = Node(graph, name, "call_function", target, args, kwargs, None)
    owner = graph.owning_module
    if owner is not None and getattr(owner, "_create_node_hooks", None) is not None:
        for hook in owner._create_node_hooks:
            hook(node)
    graph._graph_namespace.associate_name_with_obj(name, node)
    graph._insert(node)
    graph._find_nodes_lookup_table.insert(node)
    graph._len += 1
    return node


def copy_node_direct(
    tracer: Any, n: Node, target: Any, args: Any, kwargs: Any, name: str | None, pass_name: str
) -> Node | None:
    """Create `n`'s replay node in `tracer.graph` with the metadata the stock replay leaves.

    Stock: ``tracer.create_node`` under ``set_current_meta(n)`` (which copies stack_trace,
    the _COPY_META_FIELDS and a provenance record from n's meta), then
    ``meta.update(n.meta)``. When n's meta already holds everything create_node would
    derive (seq_nr; no autograd / replay state), the result is n's meta in create_node's
    key order, built here directly. Returns None when that precondition fails; the
    caller then goes through ``tracer.create_node``.
    """
    old = n.meta
    if (
        not old
        or not _fx_traceback.should_preserve_node_meta
        or tracer.check_mutable_operations
        or "seq_nr" not in old
        or old.get("in_grad_fn", 0)
        or old.get("autograd_backward", False)
        or _fx_traceback.get_current_replay_node() is not None
        or _needs_eager_input_vals(target)
    ):
        return None
    stack = old.get("stack_trace")
    if stack and _fx_traceback.GRADIENT_ACC_SPECIAL_STACK in stack:
        return None
    if not stack and tracer.record_stack_traces:
        return None
    node = _append_call_node(tracer.graph, target, args, kwargs, name)
    tracer.node_name_to_scope[node.name] = (tracer.scope.module_path, tracer.scope.module_type)
    meta = node.meta
    if stack:
        meta["stack_trace"] = stack
    for key in _COPY_META_FIELDS:
        if key == "from_node":
            meta[key] = old[key] if key in old else [shared_node_source(n, pass_name)]
        elif key in old:
            meta[key] = old[key]
    meta["seq_nr"] = old["seq_nr"]
    meta.update(old)
    return node


class _LazyDebugStr:
    """Class-level data descriptor for ``ExportPass.node_debug_str``, formatted on read.

    Stock ``run_node`` formats every node (``Node.format_node``) for this attribute,
    which only error paths and DynamicShapePropPass read.
    """

    def __init__(self) -> None:
        self.pending: weakref.WeakKeyDictionary[Any, Node] = weakref.WeakKeyDictionary()

    def __get__(self, obj: Any, objtype: Any = None) -> Any:
        if obj is None:
            return self
        node = self.pending.pop(obj, None)
        if node is not None:
            obj.__dict__["node_debug_str"] = node.format_node()
        return obj.__dict__.get("node_debug_str")

    def __set__(self, obj: Any, value: Any) -> None:
        self.pending.pop(obj, None)
        obj.__dict__["node_debug_str"] = value

    def defer(self, obj: Any, node: Node) -> None:
        try:
            self.pending[obj] = node
        except TypeError:  # not weak-referenceable: format now, as stock does
            obj.__dict__["node_debug_str"] = node.format_node()

    def materialize_all(self) -> None:
        for obj, node in list(self.pending.items()):
            obj.__dict__["node_debug_str"] = node.format_node()
        self.pending.clear()


# ----------------------------------------------------------------- vouched metadata
#
# Re-using a node's recorded meta["val"] (value reuse, fast-copy) is only sound when
# that value is what a FakeTensor dispatch of the node would produce. Passes that edit
# a graph in place may leave stale values behind (e.g. copy another node's meta onto a
# new node and rely on the next replay to fix it). So a value is re-used only from a
# node that is *vouched for*: created by a replay under pass-infra (whose value came
# from a dispatch or from a vouched node), or present in a PassPipeline's input graph,
# and unchanged since (same target, args, kwargs and meta["val"] objects).

_VOUCH_ATTR = "_lowerkit_vouched"


def vouch_node(node: Node) -> None:
    """Record that `node`'s current meta["val"] is consistent with its op and inputs."""
    setattr(node, _VOUCH_ATTR, (node.target, node.args, node.kwargs, node.meta.get("val")))


def is_vouched(node: Node) -> bool:
    """True when `node` was vouched for and its target, args, kwargs and val are unchanged."""
    record = getattr(node, _VOUCH_ATTR, None)
    return (
        record is not None
        and record[0] is node.target
        and record[1] is node.args
        and record[2] is node.kwargs
        and record[3] is node.meta.get("val")
    )


def vouch_graph(graph_module: Any) -> None:
    """Vouch for every node of a graph module tree (its metadata is taken as consistent)."""
    for module in graph_module.modules():
        if isinstance(module, torch.fx.GraphModule):
            for node in module.graph.nodes:
                vouch_node(node)


_pipeline_tls = threading.local()


@contextmanager
def pipeline_running() -> Iterator[None]:
    """Mark that a PassPipeline is running (it vouches for its input graph itself)."""
    depth = getattr(_pipeline_tls, "depth", 0)
    _pipeline_tls.depth = depth + 1
    try:
        yield
    finally:
        _pipeline_tls.depth = depth


def in_pipeline() -> bool:
    """True inside a PassPipeline run."""
    return bool(getattr(_pipeline_tls, "depth", 0))


_replay_tls = threading.local()
_MISSING = object()
_stock_set_metadata = ExportPassBase.ExportTracer.set_metadata


def _reusable_value(val: Any, mode: Any) -> bool:
    """A recorded meta["val"] a re-dispatch would reproduce: fake tensors of `mode`, static shapes."""
    if type(val) is FakeTensor:
        return val.fake_mode is mode and not any(isinstance(d, torch.SymInt) for d in val.shape)
    if isinstance(val, (list, tuple)):
        return all(_reusable_value(v, mode) for v in val)
    return val is None or type(val) in (int, float, bool)


def _same_inputs(new: Any, old: Any) -> bool:
    """True when `new` (call_operator arguments) is exactly what node args `old` recorded."""
    if isinstance(old, Node):
        if type(new) is not ProxyValue:
            return False
        recorded = old.meta.get("val", _MISSING)
        data = new.data
        return data is recorded or (
            isinstance(recorded, FakeTensor)
            and recorded.constant is not None
            and data is recorded.constant
        )
    if type(new) is ProxyValue:
        return False
    if isinstance(old, (list, tuple)):
        return (
            isinstance(new, (list, tuple))
            and len(new) == len(old)
            and all(_same_inputs(a, b) for a, b in zip(new, old, strict=True))
        )
    if isinstance(old, dict):
        return (
            isinstance(new, dict)
            and new.keys() == old.keys()
            and all(_same_inputs(new[k], old[k]) for k in old)
        )
    if isinstance(new, torch.Tensor) or isinstance(old, torch.Tensor):
        return False
    return type(new) is type(old) and bool(new == old)


def _recorded_value(self: Any, kind: str, target: Any, args: Any, kwargs: Any) -> Any:
    """The replayed node's own meta["val"] when this _fx call re-creates it unchanged."""
    node = getattr(_replay_tls, "node", None)
    if node is None or kind != "call_function" or node.target is not target:
        return _MISSING
    schema = getattr(target, "_schema", None)
    if schema is not None and schema.is_mutable:
        return _MISSING
    val = node.meta.get("val", _MISSING)
    if val is _MISSING or not _reusable_value(val, self.fake_tensor_mode):
        return _MISSING
    if not is_vouched(node):
        return _MISSING
    old_kwargs = (
        node.kwargs
        if isinstance(target, torch._ops.OpOverload) or hasattr(target, "_schema")
        else {}
    )
    if not (_same_inputs(args, node.args) and _same_inputs(kwargs, old_kwargs)):
        return _MISSING
    _replay_tls.node = None  # at most one node re-uses a recorded value
    return val


def _cheap_fx(self: Any, kind: str, target: Any, args: Any, kwargs: Any, meta: Any) -> ProxyValue:
    """``_ExportPassBase._fx``, minus the FakeTensor dispatch when it would recompute the
    replayed node's recorded value from the very same inputs."""
    val = _recorded_value(self, kind, target, args, kwargs)
    if val is _MISSING:
        val = _dispatch(self, kind, target, args, kwargs)
    result = _traced_node(self, kind, target, args, kwargs, meta, val)
    vouch_node(result.node)
    return result


def _cheap_set_metadata(self: Any, node: Node, value: Any) -> None:
    """``ExportTracer.set_metadata``; a lone FakeTensor is stored as stock stores it, without pytree."""
    if type(value) is FakeTensor:
        node.meta["val"] = value
        node.meta["tensor_meta"] = None
        return
    _stock_set_metadata(self, node, value)


def _make_cheap_run_node(lazy: _LazyDebugStr, reuse_values: bool) -> Callable[[Any, Node], Any]:
    def run_node(self: Any, n: Node) -> Any:
        # Same steps as ExportInterpreter.run_node + Interpreter.run_node, minus the
        # thrown-away work: the provenance deep copy and the eager format_node().
        if type(self)._set_current_node is not _stock_set_current_node:
            return stock_run_node(self, n)
        self.node = n
        lazy.defer(self.callback, n)
        saved = getattr(_replay_tls, "node", None)
        _replay_tls.node = n if reuse_values else None
        try:
            with shared_current_meta(n, f"Interpreter_{self.__class__.__name__}"):
                args, kwargs = self.fetch_args_kwargs_from_env(n)
                if not isinstance(args, tuple):
                    raise AssertionError(f"Expected args to be tuple, got {type(args)}")
                if not isinstance(kwargs, dict):
                    raise AssertionError(f"Expected kwargs to be dict, got {type(kwargs)}")
                return getattr(self, n.op)(n.target, args, kwargs)
        finally:
            _replay_tls.node = saved

    return run_node


# ------------------------------------------------------------------- cheaper tracing
#
# A replay spends much of its time in generic machinery that gives a known answer for the
# plain arguments ExportPass graphs hold: pytree mapping of ProxyValues over tuples / lists /
# dicts, and the five create_arg layers of ExportPass's tracer (each with isinstance checks,
# some against metaclasses with costly __instancecheck__) for a Proxy or an int. The
# functions below give the same results directly and defer to the stock code for anything
# else.

#: Argument types every create_arg layer of ExportPass.ExportTracer returns unchanged.
_PLAIN_ARG_TYPES: frozenset[type] = frozenset(
    {
        int, float, bool, complex, str, type(None), type(...),
        torch.dtype, torch.device, torch.memory_format, torch.layout,
    }
)
#: Leaf types pytree maps as leaves (none is a registered pytree node) and that are no ProxyValue.
_PYTREE_LEAF_TYPES: frozenset[type] = frozenset(
    t for t in (*_PLAIN_ARG_TYPES, FakeTensor) if t not in pytree.SUPPORTED_NODES
)
_stock_create_arg = ExportPass.ExportTracer.create_arg


def _fast_create_arg(self: Any, a: Any) -> Any:
    """``ExportPass.ExportTracer.create_arg``: proxies, plain values and plain containers of
    them map directly to what the stock layers return; anything else goes through them."""
    kind = type(a)
    if kind is _fx_proxy.Proxy:
        return a.node
    if kind in _PLAIN_ARG_TYPES:
        return a
    if kind is tuple:
        return tuple([self.create_arg(e) for e in a])
    if kind is list or kind is _immutable_list:
        return [self.create_arg(e) for e in a]
    if (kind is dict or kind is _immutable_dict) and all(type(k) is str for k in a):
        return {k: self.create_arg(v) for k, v in a.items()}
    return _stock_create_arg(self, a)


def map_proxy_values(fn: Callable[[ProxyValue], Any], tree: Any) -> Any:
    """``pytree.tree_map_only(ProxyValue, fn, tree)``, direct for tuples, lists, dicts and plain leaves."""
    kind = type(tree)
    if kind is ProxyValue:
        return fn(tree)
    if kind in _PYTREE_LEAF_TYPES:
        return tree
    if kind is tuple:
        return tuple([map_proxy_values(fn, e) for e in tree])
    if kind is list:
        return [map_proxy_values(fn, e) for e in tree]
    if kind is dict:
        return {k: map_proxy_values(fn, v) for k, v in tree.items()}
    if kind is _immutable_list:
        return _immutable_list([map_proxy_values(fn, e) for e in tree])
    if kind is _immutable_dict:
        return _immutable_dict({k: map_proxy_values(fn, v) for k, v in tree.items()})
    return pytree.tree_map_only(ProxyValue, fn, tree)


def _data_of(value: ProxyValue) -> Any:
    return value.data


def _proxy_of(value: ProxyValue) -> Any:
    return value.proxy


def _dispatch(self: Any, kind: str, target: Any, args: Any, kwargs: Any) -> Any:
    """The value ``_ExportPassBase._fx`` computes: the interpreter run on the arguments' data."""
    args_data, kwargs_data = map_proxy_values(_data_of, (args, kwargs))
    return getattr(self.interpreter, kind)(target, args_data, kwargs_data)


def _traced_node(
    self: Any, kind: str, target: Any, args: Any, kwargs: Any, meta: Any, value: Any
) -> ProxyValue:
    """The rest of ``_ExportPassBase._fx``: the traced node for `value`, named and annotated as stock does."""
    args_proxy, kwargs_proxy = map_proxy_values(_proxy_of, (args, kwargs))
    name = None
    if isinstance(target, torch._ops.OpOverload):
        name = self.tracer.graph._target_to_str(target.overloadpacket.__name__)
    res_proxy = self.tracer.create_proxy(kind, target, args_proxy, kwargs_proxy, name=name)
    res_proxy.node.meta.update(meta.data)
    self.tracer.set_metadata(res_proxy.node, value)
    return ProxyValue(value, res_proxy)


#: Stock's snapshot of an input value's symbolic sizes (None when it has none).
extract_symbolic_snapshot: Callable[[Any], Any] = _pass_base._extract_symbolic_snapshot
_stock_validate_snapshots = ExportPassBase._validate_symbolic_input_snapshots
_stock_capture_snapshots = ExportPassBase._capture_symbolic_input_snapshots


def validate_symbolic_inputs(pass_: Any, old: Any, new: Any) -> None:
    """``_validate_symbolic_input_snapshots``: it checks nothing when no input of `old` is
    symbolic, which a look at the placeholders' values shows without pytree snapshots."""
    cls = type(pass_)
    if (
        cls._validate_symbolic_input_snapshots is _stock_validate_snapshots
        and cls._capture_symbolic_input_snapshots is _stock_capture_snapshots
        and all(plainly_static(n.meta.get("val")) for n in old.graph.find_nodes(op="placeholder"))
    ):
        return
    pass_._validate_symbolic_input_snapshots(old, new)


def plainly_static(val: Any) -> bool:
    """True when `val` has no symbolic snapshot: a FakeTensor with int sizes, or a plain value."""
    if type(val) is FakeTensor:
        return all(type(d) is int for d in val.shape)
    return type(val) in _PLAIN_ARG_TYPES


_DUMMY_INTERPRETER: list[Interpreter] = []


def _dummy_interpreter() -> Interpreter:
    # ExportPass only calls the stateless call_function / output of this interpreter.
    if not _DUMMY_INTERPRETER:
        _DUMMY_INTERPRETER.append(
            Interpreter(torch.fx.GraphModule(torch.nn.Module(), torch.fx.Graph()))
        )
    return _DUMMY_INTERPRETER[0]


def _lazy_call_submodule(self: Any, graph_module: Any, inputs: Any) -> Any:
    """``_ExportPassBase.call_submodule`` building a _LazyGraphModule (code generated on first use).

    Stock generates and compiles Python code for every replayed graph, and the next pass
    replays the graph node by node without ever running that code. It also builds an
    empty GraphModule for a throwaway interpreter per call; one is shared here.
    """
    prev_tracer, self.tracer = self.tracer, self.ExportTracer(self, graph_module.graph._codegen)
    self.tracer.fake_tensor_mode = prev_tracer.fake_tensor_mode
    interpreter = self.ExportInterpreter(self, graph_module)
    prev_interpreter, self.interpreter = self.interpreter, _dummy_interpreter()
    inputs_data = map_proxy_values(_data_of, inputs)
    with _fx_traceback.preserve_node_meta():
        interpreter.run(*inputs_data)
    new_graph_module = _LazyGraphModule(self.tracer.root, self.tracer.graph)
    validate_symbolic_inputs(self, graph_module, new_graph_module)
    new_graph_module.meta = graph_module.meta.copy()
    self.tracer = prev_tracer
    self.interpreter = prev_interpreter
    return PassResult(new_graph_module, True)


def realize(graph_module: Any) -> None:
    """Generate the code of a lazily built graph module (and its nested ones) now."""
    for module in graph_module.modules():
        if isinstance(module, _LazyGraphModule):
            module.real_recompile()


def cheap_replay_patches(*, reuse_values: bool = True, lazy_recompile: bool = True) -> Patch:
    """Patches making every ExportPass replay skip work whose result is discarded or known."""
    lazy = _LazyDebugStr()
    replacements: list[tuple[Any, str, Any]] = [
        (_StockInterpreter, "run_node", _make_cheap_run_node(lazy, reuse_values)),
        (ExportPassBase, "node_debug_str", lazy),
        (ExportPassBase.ExportTracer, "set_metadata", _cheap_set_metadata),
        (ExportPass.ExportTracer, "create_arg", _fast_create_arg),
    ]
    if reuse_values:
        replacements.append((ExportPassBase, "_fx", _cheap_fx))
    if lazy_recompile:
        replacements.append((ExportPassBase, "call_submodule", _lazy_call_submodule))
    patch = Patch(replacements)
    patch.on_restore.append(lazy.materialize_all)
    return patch


# --------------------------------------------------------------------------- fake cache

_cache_tls = threading.local()
_stock_is_builtin = _library_utils.is_builtin
_stock_validate_cache_key = FakeTensorMode._validate_cache_key
_stock_set_cache_key = _fake_tensor._set_cache_key
_stock_set_cache_key_for_shape_env = _fake_tensor._set_cache_key_for_shape_env


def cache_key_func(key: Any) -> Any:
    """The operator a FakeTensor dispatch-cache key was made for."""
    return key.key[0]


def is_bypass_entry(entry: Any) -> bool:
    """True for a negative cache entry ("this op cannot be cached")."""
    return isinstance(entry, _fake_tensor._DispatchCacheBypassEntry)


def _namespace(func: Any) -> str | None:
    return func.namespace if isinstance(func, torch._ops.OpOverload) else None


def fake_cache_patches(namespaces: frozenset[str]) -> Patch:
    """Patches letting FakeTensor's dispatch cache cover ops of `namespaces`.

    FakeTensor refuses to cache non-builtin ops (``is_builtin`` = aten/prim/prims only).
    Inside the patch, ``_validate_cache_key`` treats `namespaces` as builtin (every other
    check still applies). Negative entries stock left for those ops are set aside, and
    every entry added for them is recorded; `restore` removes the added entries and puts
    the set-aside ones back, so the cache holds exactly what it held before.
    """
    added: list[tuple[dict[Any, Any], Any, bool, Any]] = []
    set_aside: dict[Any, Any] = {}

    def is_builtin(op: Any) -> bool:
        if getattr(_cache_tls, "validating", False) and _namespace(op) in namespaces:
            return True
        return _stock_is_builtin(op)

    def validate_cache_key(self: Any, func: Any, args: Any, kwargs: Any) -> None:
        _cache_tls.validating = True
        try:
            _stock_validate_cache_key(self, func, args, kwargs)
        finally:
            _cache_tls.validating = False

    def record(cache: dict[Any, Any], key: Any) -> None:
        if _namespace(cache_key_func(key)) in namespaces:
            present = key in cache
            added.append((cache, key, present, cache.get(key)))

    def set_cache_key(cache: dict[Any, Any], key: Any, entry: Any) -> None:
        record(cache, key)
        _stock_set_cache_key(cache, key, entry)

    def set_cache_key_for_shape_env(cache: dict[Any, Any], key: Any, entry: Any) -> None:
        record(cache, key)
        _stock_set_cache_key_for_shape_env(cache, key, entry)

    def set_aside_negative_entries() -> None:
        cache = FakeTensorMode.cache
        for key, entry in list(cache.items()):
            if is_bypass_entry(entry) and _namespace(cache_key_func(key)) in namespaces:
                set_aside[key] = cache.pop(key)

    def undo() -> None:
        for cache, key, present, old in reversed(added):
            if present:
                cache[key] = old
            else:
                cache.pop(key, None)
        added.clear()
        FakeTensorMode.cache.update(set_aside)
        set_aside.clear()

    patch = Patch(
        [
            (_library_utils, "is_builtin", is_builtin),
            (FakeTensorMode, "_validate_cache_key", validate_cache_key),
            (_fake_tensor, "_set_cache_key", set_cache_key),
            (_fake_tensor, "_set_cache_key_for_shape_env", set_cache_key_for_shape_env),
        ]
    )
    patch.on_restore.append(undo)
    original_apply = patch.apply

    def apply() -> None:
        original_apply()
        set_aside_negative_entries()

    patch.apply = apply  # type: ignore[method-assign]
    return patch


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
        "run_node": vars(_StockInterpreter)["run_node"],
        "_fx": vars(ExportPassBase)["_fx"],
        "call_submodule": vars(ExportPassBase)["call_submodule"],
        "set_metadata": vars(ExportPassBase.ExportTracer)["set_metadata"],
        "create_arg": vars(ExportPass.ExportTracer)["create_arg"],
        "node_debug_str": vars(ExportPassBase).get("node_debug_str"),
        "current_meta": _fx_traceback.current_meta,
    }


