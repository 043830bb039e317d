"""cheaper_replay: every ExportPass replays without the work stock throws away."""

from __future__ import annotations

import operator
import threading
import weakref
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

import torch
from torch.fx import GraphModule, Node
from torch.fx.immutable_collections import immutable_dict, immutable_list

from lowerkit.pass_infra import _upstream
from lowerkit.pass_infra._upstream import (
    EdgeOpOverload,
    ExportPass,
    ExportPassBase,
    FakeTensor,
    OpOverload,
    ProxyValue,
    StockInterpreter,
    TorchExportPassBase,
    TorchProxyValue,
    pytree,
)
from lowerkit.pass_infra.accelerations.delegate_values import delegate_call_value
from lowerkit.pass_infra.accelerations.patching import Patch, Replacement
from lowerkit.pass_infra.accelerations.replay_engine import (
    copy_node_direct,
    is_vouched,
    is_vouched_copy,
    vouch_graph,
    vouch_node,
)
from lowerkit.pass_infra.accelerations.versions import PROVEN_ON, proven_scope

__all__ = [
    "CHEAP_REPLAY",
    "ReplayOptions",
    "cheaper_replay",
    "map_proxy_values",
    "plainly_static",
    "same_fake_metadata",
    "validate_symbolic_inputs",
    "vouch_for",
]


class _LazyDebugStr:
    """Class-level data descriptor for ``ExportPass.node_debug_str``, formatted on read.

    Stock ``run_node`` formats every node (``Node.format_node``) for this attribute,
    which only error paths and DynamicShapePropPass read. Installed for every thread
    (``dispatch=False``) and neutral for threads outside a scope: only the cheaper
    run_node defers a value; every write and every other read is a plain instance attribute.
    """

    def __init__(self) -> None:
        self.pending: weakref.WeakKeyDictionary[Any, Node] = weakref.WeakKeyDictionary()
        self._lock = threading.Lock()

    def __get__(self, obj: Any, objtype: Any = None) -> Any:
        if obj is None:
            return self
        with self._lock:
            node = self.pending.pop(obj, None)
        if node is not None:
            obj.__dict__["node_debug_str"] = node.format_node()
        return obj.__dict__.get("node_debug_str")

    def __set__(self, obj: Any, value: Any) -> None:
        with self._lock:
            self.pending.pop(obj, None)
        obj.__dict__["node_debug_str"] = value

    def defer(self, obj: Any, node: Node) -> None:
        try:
            with self._lock:
                self.pending[obj] = node
        except TypeError:  # not weak-referenceable: format now, as stock does
            obj.__dict__["node_debug_str"] = node.format_node()

    def materialize_all(self) -> None:
        with self._lock:
            pending = list(self.pending.items())
            self.pending.clear()
        for obj, node in pending:
            obj.__dict__["node_debug_str"] = node.format_node()



# ------------------------------------------------------------------- cheaper replay


@dataclass(frozen=True)
class ReplayOptions:
    """What a ``cheaper_replay()`` scope asked for."""

    reuse_values: bool = True
    lazy_recompile: bool = True


_replay_tls = threading.local()
_MISSING = object()


def _reusable_value(val: Any, mode: Any) -> bool:
    """A recorded meta["val"] a re-dispatch would reproduce: fake tensors of `mode`, static shapes."""
    if type(val) is FakeTensor:
        return val.fake_mode is mode and not any(isinstance(d, torch.SymInt) for d in val.shape)
    if isinstance(val, (list, tuple)):
        return all(_reusable_value(v, mode) for v in val)
    return val is None or type(val) in (int, float, bool)


def same_fake_metadata(new: Any, old: Any) -> bool:
    """True when FakeTensors `new` and `old` have the metadata a FakeTensor dispatch reads
    (mode, dtype, device, static shape, stride, storage offset; neither a constant)."""
    if type(new) is not FakeTensor or type(old) is not FakeTensor:
        return False
    if new.fake_mode is not old.fake_mode or new.constant is not None or old.constant is not None:
        return False
    shape = new.shape
    if any(type(d) is not int for d in shape):
        return False
    return bool(
        new.dtype == old.dtype
        and shape == old.shape
        and new.stride() == old.stride()
        and new.device == old.device
        and new.storage_offset() == old.storage_offset()
        and new.requires_grad == old.requires_grad
    )


def _is_attribute_of(new: Any, old: Node) -> bool:
    """True when `new` is the module `old` (a ``get_attr`` node) reads: a delegate call's lowered module."""
    if old.op != "get_attr" or not isinstance(new, torch.nn.Module):
        return False
    owner: Any = old.graph.owning_module
    for part in str(old.target).split("."):
        owner = getattr(owner, part, None)
    return owner is new


def _same_inputs(new: Any, old: Any, equal_metadata: bool = False) -> bool:
    """True when `new` (call_operator arguments) is exactly what node args `old` recorded.

    With `equal_metadata`, a tensor input may also be another FakeTensor with the recorded
    one's metadata (a re-dispatched producer's new value): a dispatch computes the output's
    metadata from its inputs' metadata alone. Only for operators whose outputs alias none of
    their inputs (a view's value shares its input's storage, which would be the old one).
    """
    if isinstance(old, Node):
        if type(new) not in _PROXY_VALUES:
            return _is_attribute_of(new, old)
        recorded = old.meta.get("val", _MISSING)
        data = new.data
        return (
            data is recorded
            or (
                isinstance(recorded, FakeTensor)
                and recorded.constant is not None
                and data is recorded.constant
            )
            or (equal_metadata and same_fake_metadata(data, recorded))
        )
    if type(new) in _PROXY_VALUES:
        return False
    if isinstance(old, (list, tuple)):
        if not isinstance(new, (list, tuple)) or len(new) != len(old):
            return False
        old_types = list(map(type, old))
        if _PLAIN_ARG_TYPES.issuperset(old_types):
            # Plain values only (a rescale's per-channel scales can be hundreds long): the
            # element checks below (same type, ==), made in C.
            return all(map(operator.is_, map(type, new), old_types)) and all(map(operator.eq, new, old))
        for a, b in zip(new, old, strict=True):
            # The common elements inline (a call per element is most of this check's cost).
            if type(b) is Node and type(a) in _PROXY_VALUES:
                if a.data is not b.meta.get("val", _MISSING) and not _same_inputs(a, b, equal_metadata):
                    return False
            elif type(b) in _PLAIN_ARG_TYPES:
                if type(a) is not type(b) or a != b:
                    return False
            elif not _same_inputs(a, b, equal_metadata):
                return False
        return True
    if isinstance(old, dict):
        return (
            isinstance(new, dict)
            and new.keys() == old.keys()
            and all(_same_inputs(new[k], old[k], equal_metadata) for k in old)
        )
    if isinstance(new, torch.Tensor) or isinstance(old, torch.Tensor):
        return False
    return type(new) is type(old) and bool(new == old)


def _computes_as(target: Any, recorded: Any) -> bool:
    """True when calling `target` computes what calling `recorded` does: the same operator, or
    the edge dialect's wrapper of it (``EdgeOpOverload.__call__`` calls its ATen op; ExecuTorch's
    ``OpReplacePass`` re-creates every ATen node as its edge op)."""
    return target is recorded or (type(target) is EdgeOpOverload and _upstream.edge_op_aten(target) is recorded)


def _recorded_value(self: Any, kind: str, target: Any, args: Any, kwargs: Any) -> Any:
    """The replayed node's own meta["val"] when this _fx call computes it from the same inputs."""
    node = getattr(_replay_tls, "node", None)
    if node is None or kind != "call_function" or not _computes_as(target, node.target):
        return _MISSING
    target = node.target  # the ATen op's schema: an edge op's says the same, in its own class
    schema = getattr(target, "_schema", None)
    if schema is not None and schema.is_mutable:
        return _MISSING
    val = node.meta.get("val", _MISSING)
    if val is _MISSING or not _reusable_value(val, self.fake_tensor_mode):
        return _MISSING
    delegate = not is_vouched(node)
    if delegate:
        val = _delegate_call_value(node)
        if val is None:
            return _MISSING
    old_kwargs = (
        node.kwargs
        if isinstance(target, OpOverload) or hasattr(target, "_schema")
        else {}
    )
    # a delegate's outputs are none of its inputs (`delegate_call_value`): computed from their metadata
    loose = delegate or (type(val) is FakeTensor and not _upstream.returns_alias(target))
    if not (_same_inputs(args, node.args, loose) and _same_inputs(kwargs, old_kwargs, loose)):
        return _MISSING
    _replay_tls.node = None  # at most one node re-uses a recorded value
    return val


def _delegate_call_value(node: Node) -> Any:
    """The value of `node` when it is a delegate call whose program computes its recorded value,
    each of its calls vouched for or a vouched copy (`delegate_values`); else None."""
    if node.target is not _upstream.executorch_call_delegate():
        return None
    return delegate_call_value(node, lambda call: is_vouched(call) or is_vouched_copy(call))


def _cheap_fx(self: Any, kind: str, target: Any, args: Any, kwargs: Any, meta: Any) -> ProxyValue:
    """``_ExportPassBase._fx``, minus the FakeTensor dispatch when it would recompute the
    replayed node's recorded value from the very same inputs; a node re-created exactly as it
    was (same op, inputs and metadata: a pass that leaves it alone) is copied as fast-copy does.

    Also torch's copy of ``_fx`` (`TorchExportPassBase`): a node of its passes that needs a
    dispatch takes torch's own ``_fx``, which also records unbacked-symbol bindings (a reused
    value made no new symbol, so stock records none for it)."""
    node = getattr(_replay_tls, "node", None)
    val = _recorded_value(self, kind, target, args, kwargs)
    if val is not _MISSING:
        result = _node_for_recorded(self, node, kind, target, args, kwargs, meta, val)
    elif isinstance(self, TorchExportPassBase):
        result = _upstream.stock_torch_fx(self, kind, target, args, kwargs, meta)
    else:
        result = _traced_node(self, kind, target, args, kwargs, meta, _dispatch(self, kind, target, args, kwargs))
    vouch_node(result.node)
    return result


def _node_for_recorded(
    self: Any, node: Node | None, kind: str, target: Any, args: Any, kwargs: Any, meta: Any, val: Any
) -> ProxyValue:
    """The traced node for a reused recorded value: copied as fast-copy copies it when the pass
    re-creates `node` exactly as it was, else traced as stock traces it."""
    if node is not None and type(val) is FakeTensor and _unchanged_meta(meta, node.meta):
        copied = _copied_node(self, node, target, args, kwargs, val)
        if copied is not None:
            return copied
    return _traced_node(self, kind, target, args, kwargs, meta, val)


def _unchanged_meta(meta: Any, old: dict[str, Any]) -> bool:
    """True when a call_operator `meta` holds exactly the replayed node's metadata (same objects)."""
    data = getattr(meta, "data", None)
    if type(data) is not dict or len(data) != len(old):
        return False
    for key, value in old.items():
        if data.get(key, _MISSING) is not value:
            return False
    return True


def _copied_node(
    self: Any, old: Node, target: Any, args: Any, kwargs: Any, val: FakeTensor
) -> ProxyValue | None:
    """What `_traced_node` makes for `old` re-created unchanged, built as fast-copy builds it.

    Stock: ``create_proxy`` under the replayed node's current meta, then ``meta.update`` with
    that node's metadata and ``set_metadata``; `copy_node_direct` gives the same node directly
    (None when its preconditions fail: the stock path runs).
    """
    tracer = self.tracer
    args_proxy, kwargs_proxy = map_proxy_values(_proxy_of, (args, kwargs))
    node_args = tracer.create_arg(args_proxy)
    node_kwargs = tracer.create_arg(kwargs_proxy)
    if type(node_args) is not tuple or type(node_kwargs) is not dict:
        return None
    name = None
    if isinstance(target, OpOverload):
        name = _upstream.target_to_str(tracer.graph, target.overloadpacket.__name__)
    pass_name = getattr(_replay_tls, "pass_name", "")
    if not pass_name:
        return None
    node = copy_node_direct(tracer, old, target, node_args, node_kwargs, name, pass_name)
    if node is None:
        return None
    tracer.set_metadata(node, val)
    return _proxy_value_class(self)(val, tracer.proxy(node))


def _cheap_set_metadata(self: Any, node: Node, value: Any) -> None:
    """``ExportTracer.set_metadata`` (ExecuTorch's, or torch's copy: the same method, line for
    line); a lone FakeTensor is stored as stock stores it, without pytree."""
    if type(value) is FakeTensor:
        node.meta["val"] = value
        node.meta["tensor_meta"] = None
    elif isinstance(self, TorchExportPassBase.ExportTracer):
        _upstream.stock_torch_set_metadata(self, node, value)
    else:
        _upstream.stock_set_metadata(self, node, value)


_LAZY_DEBUG_STR = _LazyDebugStr()


def _cheap_run_node(self: Any, n: Node) -> Any:
    """ExportInterpreter.run_node minus the provenance deep copy and the eager format_node()."""
    if _upstream.overrides_set_current_node(self):
        return _upstream.stock_run_node(self, n)
    options = CHEAP_REPLAY.options()
    saved = getattr(_replay_tls, "node", None), getattr(_replay_tls, "pass_name", "")
    pass_name = f"Interpreter_{self.__class__.__name__}"
    _replay_tls.node = n if options.reuse_values else None
    _replay_tls.pass_name = pass_name
    try:
        return _upstream.replay_run_node(self, n, _LAZY_DEBUG_STR.defer, pass_name)
    finally:
        _replay_tls.node, _replay_tls.pass_name = saved


# A replay spends much of its time in generic machinery that gives a known answer for the
# plain arguments ExportPass graphs hold: pytree mapping of ProxyValues over tuples / lists /
# dicts, and the five create_arg layers of ExportPass's tracer (each with isinstance checks,
# some against metaclasses with costly __instancecheck__) for a Proxy or an int. The
# functions below give the same results directly and defer to the stock code for anything
# else.

#: ExecuTorch's ProxyValue and torch's copy of it (`TorchExportPassBase` passes).
_PROXY_VALUES: frozenset[type] = frozenset({ProxyValue, TorchProxyValue})
#: Argument types every create_arg layer of ExportPass.ExportTracer returns unchanged.
_PLAIN_ARG_TYPES: frozenset[type] = frozenset(
    {
        int, float, bool, complex, str, type(None), type(...),
        torch.dtype, torch.device, torch.memory_format, torch.layout,
    }
)  # fmt: skip
#: Leaf types pytree maps as leaves (none is a registered pytree node) and that are no ProxyValue.
_PYTREE_LEAF_TYPES: frozenset[type] = frozenset(
    t for t in (*_PLAIN_ARG_TYPES, FakeTensor) if t not in pytree.SUPPORTED_NODES
)


def _fast_create_arg(self: Any, a: Any) -> Any:
    """``ExportPass.ExportTracer.create_arg``: proxies, plain values and plain containers of
    them map directly to what the stock layers return; anything else goes through them."""
    kind = type(a)
    if kind is torch.fx.Proxy:
        return a.node
    if kind in _PLAIN_ARG_TYPES:
        return a
    if kind is tuple:
        return tuple([self.create_arg(e) for e in a])
    if kind is list or kind is immutable_list:
        return [self.create_arg(e) for e in a]
    if (kind is dict or kind is immutable_dict) and all(type(k) is str for k in a):
        return {k: self.create_arg(v) for k, v in a.items()}
    return _upstream.stock_create_arg(self, a)


def map_proxy_values(fn: Callable[[ProxyValue], Any], tree: Any) -> Any:
    """``pytree.tree_map_only(ProxyValue, fn, tree)``, direct for tuples, lists, dicts and plain leaves."""
    kind = type(tree)
    if kind is ProxyValue or kind is TorchProxyValue:
        return fn(tree)
    if kind in _PYTREE_LEAF_TYPES:
        return tree
    if kind is tuple:
        return tuple([map_proxy_values(fn, e) for e in tree])
    if kind is list:
        return [map_proxy_values(fn, e) for e in tree]
    if kind is dict:
        return {k: map_proxy_values(fn, v) for k, v in tree.items()}
    if kind is immutable_list:
        return immutable_list([map_proxy_values(fn, e) for e in tree])
    if kind is immutable_dict:
        return immutable_dict({k: map_proxy_values(fn, v) for k, v in tree.items()})
    return pytree.tree_map_only((ProxyValue, TorchProxyValue), fn, tree)


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
    if isinstance(target, OpOverload):
        name = _upstream.target_to_str(self.tracer.graph, target.overloadpacket.__name__)
    res_proxy = self.tracer.create_proxy(kind, target, args_proxy, kwargs_proxy, name=name)
    res_proxy.node.meta.update(meta.data)
    self.tracer.set_metadata(res_proxy.node, value)
    return _proxy_value_class(self)(value, res_proxy)


def _proxy_value_class(pass_: Any) -> Any:
    """The ProxyValue class `pass_`'s base hands around (ExecuTorch's, or torch's copy)."""
    return TorchProxyValue if isinstance(pass_, TorchExportPassBase) else ProxyValue


def validate_symbolic_inputs(pass_: Any, old: Any, new: Any) -> None:
    """``_validate_symbolic_input_snapshots``: it checks nothing when no input of `old` is
    symbolic, which a look at the placeholders' values shows without pytree snapshots."""
    cls = type(pass_)
    if (
        getattr(cls, "_validate_symbolic_input_snapshots", None) is _upstream.stock_validate_snapshots
        and getattr(cls, "_capture_symbolic_input_snapshots", None)
        is _upstream.stock_capture_snapshots
        and all(plainly_static(n.meta.get("val")) for n in old.graph.find_nodes(op="placeholder"))
    ):
        return
    _upstream.validate_symbolic_snapshots(pass_, old, new)


def plainly_static(val: Any) -> bool:
    """True when `val` has no symbolic snapshot: a FakeTensor with int sizes, or a plain value."""
    if type(val) is FakeTensor:
        return all(type(d) is int for d in val.shape)
    return type(val) in _PLAIN_ARG_TYPES


def _map_data(inputs: Any) -> Any:
    return map_proxy_values(_data_of, inputs)


def _lazy_call_submodule(self: Any, graph_module: Any, inputs: Any) -> Any:
    """``_ExportPassBase.call_submodule`` building a _LazyGraphModule (code generated on first use)."""
    return _upstream.lazy_call_submodule(
        self, graph_module, inputs, _map_data, validate_symbolic_inputs
    )


def _lazy_torch_call_submodule(self: Any, graph_module: Any, inputs: Any) -> Any:
    """torch's copy of ``call_submodule`` (`TorchExportPassBase`) building a _LazyGraphModule."""
    return _upstream.lazy_call_submodule(self, graph_module, inputs, _map_data, None)


def _replay_replacements() -> list[Replacement]:
    return [
        Replacement(StockInterpreter, "run_node", _cheap_run_node),
        Replacement(ExportPassBase, "node_debug_str", _LAZY_DEBUG_STR, dispatch=False),
        Replacement(ExportPassBase.ExportTracer, "set_metadata", _cheap_set_metadata),
        Replacement(ExportPass.ExportTracer, "create_arg", _fast_create_arg),
        Replacement(ExportPassBase, "_fx", _cheap_fx, enabled=lambda o: o.reuse_values),
        Replacement(
            ExportPassBase, "call_submodule", _lazy_call_submodule, enabled=lambda o: o.lazy_recompile
        ),
        # torch's copy of the same base (ExecuTorch's edge stage runs ReplaceViewOpsWithViewCopyOpsPass on it)
        Replacement(TorchExportPassBase.ExportInterpreter, "run_node", _cheap_run_node),
        Replacement(TorchExportPassBase, "node_debug_str", _LAZY_DEBUG_STR, dispatch=False),
        Replacement(TorchExportPassBase.ExportTracer, "set_metadata", _cheap_set_metadata),
        Replacement(TorchExportPassBase, "_fx", _cheap_fx, enabled=lambda o: o.reuse_values),
        Replacement(
            TorchExportPassBase, "call_submodule", _lazy_torch_call_submodule, enabled=lambda o: o.lazy_recompile
        ),
    ]


#: Every ExportPass replay skips work whose result is discarded or known (``cheaper_replay``).
CHEAP_REPLAY = Patch(
    "lowerkit.pass_infra.accelerations.cheaper_replay",
    _replay_replacements,
    on_uninstall=[_LAZY_DEBUG_STR.materialize_all],
)



@contextmanager
def cheaper_replay(*, reuse_values: bool = True, lazy_recompile: bool = True) -> Iterator[None]:
    """Within the block every ExportPass replays without work whose result is discarded or known.

    - the provenance chain (``meta["from_node"]``) is shared, not deep-copied;
    - ``node_debug_str`` is formatted only when read;
    - with `reuse_values`, a node that ``call_operator`` re-creates with the same op and
      the very same input values takes its recorded ``meta["val"]`` instead of a new
      FakeTensor dispatch (never for mutating ops or symbolic shapes), if that value is
      vouched for: the node was made by an earlier replay (or is in a graph passed to
      `vouch_for`) and its target, args, kwargs and val are unchanged since;
    - with `lazy_recompile`, a replayed graph module is a ``_LazyGraphModule``: its Python
      code is generated when first used (``.code``, calling it), not after every pass.
    - plain arguments (proxies, scalars, dtypes, and tuples / lists / dicts of them) are
      unwrapped and handed to the tracer directly, not through pytree and the tracer's five
      ``create_arg`` layers; a replay whose graph inputs all have static shapes skips the
      symbolic-input snapshots, which would find nothing to check.

    The resulting graphs and node metadata equal the stock replay's. Applies to every
    ExportPass (lowerkit's or upstream's, overriding call() or not) replayed by the thread
    inside the block; other threads replay the stock way. The block holds the process-wide
    lowering lock; scopes nest (reference-counted); restored when the last one exits. On
    torch / ExecuTorch versions other than ``PROVEN_ON`` it replays the stock way, with an
    ``UnprovenVersionWarning``.
    """
    options = ReplayOptions(reuse_values, lazy_recompile)
    with proven_scope("lowerkit-pass-infra", PROVEN_ON, "cheaper_replay", CHEAP_REPLAY.scope(options)):
        yield


def vouch_for(graph_module: GraphModule) -> None:
    """Declare every node's meta["val"] in `graph_module` consistent, so replays may reuse them.

    PassPipeline does this for its input graph; nodes that passes create or edit in
    place afterwards are not vouched for until a replay re-creates them.
    """
    vouch_graph(graph_module)
