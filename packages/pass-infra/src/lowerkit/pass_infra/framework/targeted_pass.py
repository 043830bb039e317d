"""TargetedPass: an ExportPass that declares its ops, skips graphs without them and
copies the nodes it does not target instead of re-dispatching them through FakeTensor."""

from __future__ import annotations

import copy
import operator
import weakref
from collections.abc import Collection, Hashable
from dataclasses import dataclass
from typing import Any, ClassVar

import torch
from executorch.exir import memory
from executorch.exir.delegate import executorch_call_delegate
from executorch.exir.pass_base import ExportPass
from torch.fx import GraphModule, Node
from torch.fx.node import map_arg
from torch.fx.passes.infra.pass_base import PassResult

from lowerkit.pass_infra import _upstream
from lowerkit.pass_infra._upstream import (
    TORCH_SYM_OPS,
    EdgeOpOverload,
    ExportPassBase,
    FakeTensor,
    OpOverload,
    OpOverloadPacket,
    ProxyValue,
    pytree,
    shared_current_meta,
)
from lowerkit.pass_infra.accelerations.replay_engine import (
    copy_node_direct,
    in_pipeline,
    is_vouched,
    vouch_node,
)
from lowerkit.pass_infra.accelerations.versions import PROVEN_ON, proven
from lowerkit.pass_infra.errors import PassInfraError
from lowerkit.pass_infra.framework.op_matching import declared_keys, graph_has_target, is_targeted

__all__ = [
    "FastCopyInterpreterMixin",
    "TargetedPass",
    "as_targeted",
    "fast_copy_enabled",
    "fast_copy_node",
    "reference_copy",
    "should_run",
]

_REFERENCE_ATTR = "_lowerkit_reference"
_FALLBACK = object()
_MISSING = object()
_OP_TYPES = (OpOverload, OpOverloadPacket, EdgeOpOverload)


@dataclass(frozen=True)
class _Plan:
    keys: frozenset[Hashable]
    getitem_ok: bool
    sym_ok: bool
    fake_mode: Any
    #: In a PassPipeline only vouched-for values are copied; a pass run on its own
    #: takes its input graph's metadata as consistent (as ExportPass does).
    require_vouch: bool


def _declared(pass_: Any) -> Collection[Any] | None:
    ops = getattr(pass_, "targeted_ops", None)
    return None if ops is None else tuple(ops)


#: Per pass class, (declared ops, their match keys): kept on lowerkit's side, never on the class.
_KEYS: weakref.WeakKeyDictionary[type, tuple[Any, frozenset[Hashable]]] = (
    weakref.WeakKeyDictionary()
)


def _keys_of(pass_: Any) -> frozenset[Hashable] | None:
    cls = type(pass_)
    ops = _declared(pass_)
    if ops is None:
        return None
    cache = _KEYS.get(cls)
    if cache is not None and cache[0] == ops:
        return cache[1]
    keys = declared_keys(ops)
    try:
        _KEYS[cls] = (ops, keys)
    except TypeError:
        pass
    return keys


def _overrides(pass_: Any, name: str) -> bool:
    return getattr(type(pass_), name) is not getattr(ExportPass, name)


def fast_copy_enabled(pass_: Any) -> bool:
    """Whether `pass_` may fast-copy untargeted nodes right now."""
    if getattr(pass_, _REFERENCE_ATTR, False) or _declared(pass_) is None:
        return False
    cls: Any = type(pass_)
    call = cls.call
    stock_call = call is ExportPassBase.call or call is TargetedPass.call
    return stock_call or bool(getattr(pass_, "fast_copy_safe", False))


def _plan_for(pass_: Any) -> _Plan | None:
    if not fast_copy_enabled(pass_):
        return None
    if not proven("lowerkit-pass-infra", PROVEN_ON, "fast-copy of untargeted nodes"):
        return None
    keys = _keys_of(pass_)
    if keys is None:
        return None
    return _Plan(
        keys=keys,
        getitem_ok=not _overrides(pass_, "call_getitem"),
        sym_ok=not _overrides(pass_, "call_sym"),
        fake_mode=getattr(pass_, "fake_tensor_mode", None),
        require_vouch=in_pipeline(),
    )


def _in_mode(val: Any, mode: Any) -> bool:
    if type(val) is FakeTensor:
        return val.fake_mode is mode
    for leaf in pytree.tree_leaves(val):
        if isinstance(leaf, torch.Tensor):
            if not isinstance(leaf, FakeTensor) or leaf.fake_mode is not mode:
                return False
    return True


def _same_value(new: Any, old: Any) -> bool:
    """True when a re-dispatch on `new` would see the same metadata as on `old`."""
    if new is old:
        return True
    if isinstance(old, FakeTensor) and old.constant is not None and new is old.constant:
        return True  # a lifted constant: ExportPass.inputs() hands out fake.constant
    if isinstance(new, FakeTensor):
        if not isinstance(old, FakeTensor) or new.fake_mode is not old.fake_mode:
            return False
        if new.constant is not None or old.constant is not None:
            return False
        return _same_tensor_meta(new, old)
    if isinstance(new, (list, tuple)):
        return (
            type(new) is type(old)
            and len(new) == len(old)
            and all(_same_value(a, b) for a, b in zip(new, old, strict=True))
        )
    if type(new) in (int, float, bool) and type(new) is type(old):
        return bool(new == old)
    return False


def _proxy_node(env: dict[Node, Any]) -> Any:
    def lookup(arg: Node) -> Node:
        return env[arg].node

    return lookup


def _same_tensor_meta(new: torch.Tensor, old: torch.Tensor) -> bool:
    if any(isinstance(d, torch.SymInt) for d in (*new.shape, *old.shape)):
        return False
    return bool(
        new.dtype == old.dtype
        and new.shape == old.shape
        and new.stride() == old.stride()
        and new.device == old.device
        and new.storage_offset() == old.storage_offset()
    )


def _classify_ok(target: Any, plan: _Plan) -> bool:
    if target is operator.getitem:
        return plan.getitem_ok
    if isinstance(target, _OP_TYPES):
        return True
    if target is memory.alloc or target is executorch_call_delegate:
        return False
    if getattr(target, "__module__", None) in {"_operator", "builtins", "math"}:
        return plan.sym_ok
    if target in TORCH_SYM_OPS:
        return plan.sym_ok
    return False  # higher-order ops and anything else: full replay


def fast_copy_node(interpreter: Any, plan: _Plan, n: Node) -> Any:
    """Copy `n` into the pass's new graph with its metadata, or return _FALLBACK."""
    target = n.target
    if is_targeted(target, plan.keys) or not _classify_ok(target, plan):
        return _FALLBACK
    meta = n.meta
    val = meta.get("val", _MISSING)
    if val is _MISSING or (plan.require_vouch and not is_vouched(n)):
        return _FALLBACK
    if not _in_mode(val, plan.fake_mode):
        return _FALLBACK
    env = interpreter.env
    # Phase 1, no side effects: every input must still be what the old graph recorded.
    direct = True
    for arg in n.all_input_nodes:
        value = env[arg]
        old = arg.meta.get("val", _MISSING)
        if type(value) is ProxyValue:
            if not _same_value(value.data, old):
                return _FALLBACK
        elif (
            arg.op == "get_attr"
            and isinstance(value, torch.Tensor)
            and not isinstance(value, FakeTensor)
            and isinstance(old, FakeTensor)
            and _same_tensor_meta(value, old)
        ):
            direct = False
        else:
            return _FALLBACK
    interpreter.node = n
    tracer = interpreter.callback.tracer
    name = None
    if isinstance(target, OpOverload):
        name = _upstream.target_to_str(tracer.graph, target.overloadpacket.__name__)
    pass_name = interpreter.lowerkit_pass_name
    op_kwargs = isinstance(target, _OP_TYPES)
    node = None
    if direct:
        lookup = _proxy_node(env)
        args = map_arg(n.args, lookup)
        kwargs = map_arg(n.kwargs, lookup) if op_kwargs else {}
        node = copy_node_direct(tracer, n, target, args, kwargs, name, pass_name)
    if node is None:

        def remap(arg: Node) -> Any:
            value = env[arg]
            if type(value) is ProxyValue:
                return value.node
            return tracer.create_arg(value)  # a get_attr tensor: exactly as the stock replay

        # Same metadata as the stock replay: create_node under the node's current_meta,
        # then the old meta on top.
        with shared_current_meta(n, pass_name):
            args = map_arg(n.args, remap)
            kwargs = map_arg(n.kwargs, remap) if op_kwargs else {}
            node = tracer.create_node("call_function", target, args, kwargs, name=name)
        node.meta.update(meta)
    # ... then set_metadata with the (unchanged) value.
    if type(val) is FakeTensor:
        node.meta["val"] = val
        node.meta["tensor_meta"] = None
    else:
        tracer.set_metadata(node, val)
    vouch_node(node)
    return ProxyValue(val, tracer.proxy(node))


class FastCopyInterpreterMixin:
    """Mixin for an ExportInterpreter: untargeted call_function nodes are copied, not replayed."""

    callback: Any

    def __init__(self, callback: Any, gm: GraphModule) -> None:
        super().__init__(callback, gm)  # type: ignore[call-arg]
        self._lowerkit_plan = _plan_for(callback)
        # What torch's Interpreter names provenance records after (its class name).
        self.lowerkit_pass_name = f"Interpreter_{self.__class__.__name__}"

    def run_node(self, n: Node) -> Any:
        plan = self._lowerkit_plan
        if plan is not None and n.op == "call_function":
            result = fast_copy_node(self, plan, n)
            if result is not _FALLBACK:
                return result
        return super().run_node(n)  # type: ignore[misc]


class TargetedPass(ExportPass):
    """An ExportPass that declares `targeted_ops`; skips graphs without them and fast-copies the rest."""

    #: The ops this pass transforms (overloads, packets or functions); None = all ops.
    targeted_ops: ClassVar[Collection[Any] | None] = None
    #: Set True on a subclass that overrides call() when fast-copy is still correct.
    fast_copy_safe: ClassVar[bool] = False

    class ExportInterpreter(FastCopyInterpreterMixin, ExportPass.ExportInterpreter):
        """ExportPass's interpreter with fast-copy of untargeted nodes."""

    def should_run(self, graph_module: GraphModule) -> bool:
        """False when no call_function node in the graph (nested graphs included) is targeted."""
        return should_run(self, graph_module)

    def call(self, graph_module: GraphModule) -> PassResult:
        """Run the pass, or return the graph unchanged when `should_run` is False."""
        if getattr(self, _REFERENCE_ATTR, False):
            return super().call(graph_module)
        if not self.should_run(graph_module):
            return PassResult(graph_module, False)
        return super().call(graph_module)


def should_run(pass_: Any, graph_module: GraphModule) -> bool:
    """Whether `pass_` has anything to do in `graph_module` (True for untargeted passes)."""
    if getattr(pass_, _REFERENCE_ATTR, False):
        return True
    keys = _keys_of(pass_)
    if keys is None:
        return True
    return graph_has_target(graph_module, keys)


_TARGETED_CLASSES: dict[tuple[type, bool, bool], type] = {}


def _always(self: Any, graph_module: GraphModule) -> bool:
    return True


def _targeted_class(cls: Any, fast_copy_safe: bool, skip_without_targets: bool = True) -> type:
    key = (cls, fast_copy_safe, skip_without_targets)
    made = _TARGETED_CLASSES.get(key)
    if made is not None:
        return made
    interpreter = type(
        "ExportInterpreter",
        (FastCopyInterpreterMixin, cls.ExportInterpreter),
        {},
    )
    interpreter.__qualname__ = f"{cls.__qualname__}.ExportInterpreter"
    namespace = {
        "ExportInterpreter": interpreter,
        "should_run": (lambda self, gm: should_run(self, gm)) if skip_without_targets else _always,
        "fast_copy_safe": fast_copy_safe,
        "_lowerkit_original": cls,
        "__module__": cls.__module__,
        "__qualname__": cls.__qualname__,
        "__doc__": cls.__doc__,
    }
    made = type(cls.__name__, (cls,), namespace)
    # A class attribute the pass's __init_subclass__ gave the copy anew (ExecuTorch's
    # AtenToDialectPass gives each subclass an empty substitution registry) is the pass's own.
    for name in [n for n in vars(made) if n not in namespace and not n.startswith("__") and hasattr(cls, n)]:
        delattr(made, name)
    _TARGETED_CLASSES[key] = made
    return made


def as_targeted(
    pass_: ExportPass,
    targeted_ops: Collection[Any] | None = None,
    *,
    fast_copy_safe: bool = False,
    skip_without_targets: bool = True,
) -> ExportPass:
    """A copy of an existing ExportPass instance that runs with targets, should_run and fast-copy.

    `targeted_ops` defaults to `discover_targeted_ops(pass_)`. The copy's class is a
    subclass of the pass's class with the same name, so names and isinstance checks hold.
    Without `skip_without_targets` the copy always runs (a pass whose ``call()`` does work of
    its own and then replays, the replay going through ``call_operator`` only for `targeted_ops`).
    """
    from lowerkit.pass_infra.framework.discovery import discover_targeted_ops

    if not isinstance(pass_, ExportPass):
        raise PassInfraError(
            f"as_targeted() needs an ExportPass instance, got {type(pass_).__name__}; "
            "instantiate the pass class first"
        )
    if isinstance(pass_, TargetedPass):
        return pass_
    ops = discover_targeted_ops(pass_) if targeted_ops is None else tuple(targeted_ops)
    original = getattr(type(pass_), "_lowerkit_original", type(pass_))
    made = copy.copy(pass_)
    made.__class__ = _targeted_class(original, fast_copy_safe, skip_without_targets)
    made.__dict__["targeted_ops"] = None if ops is None else tuple(ops)
    if ops is not None:
        declared_keys(ops)  # validate early
    return made


def _operators_kept(value: Any, memo: dict[int, Any] | None = None, depth: int = 0) -> dict[int, Any]:
    """A deepcopy memo mapping every operator object reachable from `value` to itself.

    Deep-copying an ExecuTorch op overload gives a new object that is not equal to the original,
    so a deep-copied pass would no longer recognise the ops it holds (e.g. in a target set).
    """
    memo = {} if memo is None else memo
    if _upstream.is_operator(value):
        memo[id(value)] = value
    elif depth < 4:
        if isinstance(value, dict):
            children: Any = [*value.keys(), *value.values()]
        elif isinstance(value, list | tuple | set | frozenset):
            children = value
        else:
            children = list(vars(value).values()) if hasattr(value, "__dict__") and depth == 0 else []
        for child in children:
            _operators_kept(child, memo, depth + 1)
    return memo


def reference_copy(pass_: Any) -> Any:
    """A copy of `pass_` that replays the stock ExportPass way (no skip, no fast-copy)."""
    try:
        ref = copy.deepcopy(pass_, _operators_kept(pass_))
    except Exception:
        ref = copy.copy(pass_)
    original = getattr(type(ref), "_lowerkit_original", None)
    if original is not None:
        ref.__class__ = original
    try:
        setattr(ref, _REFERENCE_ATTR, True)
    except AttributeError:
        pass
    return ref
