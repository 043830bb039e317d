"""Incremental drop-in versions of the Arm permute/view propagation fixpoint passes.

Upstream's ``PropagateViewCopyPermuteUpPass`` / ``...DownPass`` (and the helper passes they
call: duplicate-user fusion, identical-input-transform fusion, view/permute canonicalization,
permute removal around elementwise ops) re-run the whole graph through ExportPass after every
round until nothing changes. The re-run only serves to refresh node metadata (``meta["val"]``)
and renumber node names. Here every intermediate re-run is replaced by a metadata refresh of
the nodes whose inputs changed, done in place, after which the graph is brought into the exact
state a re-run would leave (node order, user order, input order); one real re-run at the end
gives the same names and metadata as upstream's last one. Upstream's algorithm (its decisions,
rewrites and helper passes) is reused unchanged.
"""

from __future__ import annotations

import itertools
import operator
from collections.abc import Callable
from typing import Any

import torch
from executorch.backends.transforms.canonicalize_view_copy_permute_pass import (
    CanonicalizeViewCopyPermutePass,
)
from executorch.backends.transforms.fuse_duplicate_users_pass import FuseDuplicateUsersPass
from executorch.backends.transforms.fuse_identical_input_transforms_pass import (
    FuseIdenticalInputTransformsPass,
)
from executorch.exir.pass_base import ExportPass
from torch.fx import GraphModule, Node
from torch.fx.passes.infra.pass_base import PassResult

from lowerkit.arm_passes import _upstream
from lowerkit.arm_passes._upstream import (
    TOSA_EXCLUDED_TARGETS,
    EdgeOpOverload,
    FakeTensor,
    OpOverload,
    RemovePermutesAroundElementwiseTosaOps,
    pytree,
)
from lowerkit.arm_passes.targets import no_quantized_fake_kernel_ops
from lowerkit.pass_infra.accelerations.replay_engine import indistinguishable, is_vouched

__all__ = [
    "IncrementalPropagateViewCopyPermuteDownPass",
    "IncrementalPropagateViewCopyPermuteUpPass",
    "incremental_version",
]

_NO_QUANTIZED_FAKE_KERNEL = no_quantized_fake_kernel_ops()


class _RefreshUnsupported(Exception):
    """The graph holds something the in-place refresh does not model; re-run it the stock way."""


class _Refresher:
    """Brings a mutated graph to the state an ExportPass re-run would leave, without re-running it.

    Memoizes per node the input values it last computed from, so only nodes whose inputs or
    arguments changed are re-dispatched through FakeTensor; a node pass-infra vouches for
    needs no first dispatch (a replay would re-use its value as it is).
    """

    def __init__(self, arm_call_operator: bool) -> None:
        self._arm = arm_call_operator
        self._seen: dict[Node, tuple[Any, ...]] = {}

    def refresh(self, graph_module: GraphModule) -> None:
        graph = graph_module.graph
        for node in graph.nodes:
            if node.op == "call_function":
                target = node.target
                if not (
                    target is operator.getitem
                    or isinstance(target, (EdgeOpOverload, OpOverload))
                ):
                    raise _RefreshUnsupported(f"target {target}")
            elif node.op not in ("placeholder", "output"):
                raise _RefreshUnsupported(f"op {node.op}")
        if any(isinstance(m, GraphModule) for m in graph_module.children()):
            raise _RefreshUnsupported("nested graph modules")

        self._canonicalize_uses(graph_module)

        fake_mode = _upstream.fake_mode_of(graph_module)
        if fake_mode is None:
            raise _RefreshUnsupported("no fake mode")
        seen_meta: set[int] = set()
        with (
            _upstream.disable_fake_mode_checks(fake_mode),
            fake_mode,
            _upstream.enable_python_dispatcher(),
        ):
            for node in graph.nodes:
                if id(node.meta) in seen_meta:
                    node.meta = dict(node.meta)
                seen_meta.add(id(node.meta))
                if node.op == "call_function":
                    self._refresh_node(node)
                elif node.op == "output":
                    results = pytree.tree_map_only(Node, lambda n: n.meta.get("val"), node.args[0])
                    node.meta["val"] = results
                    node.meta["tensor_meta"] = pytree.tree_map(lambda _x: None, results)

    @staticmethod
    def _canonicalize_uses(graph_module: GraphModule) -> None:
        """Put every ``users`` dict in graph order, as a fresh trace creates them.

        Re-assigning every node's args in graph order (each use re-registered last) gives
        that order; only the dicts not already in it are re-ordered here, to the same order.
        Input orders need nothing: torch rebuilds them from the args on every change. Args
        are left as they are, so pass-infra's vouch for a node's metadata (its args checked
        by identity) holds and the closing re-run copies the node instead of re-dispatching.
        """
        position = {node: i for i, node in enumerate(graph_module.graph.nodes)}
        for node in graph_module.graph.nodes:
            users = node.users
            if len(users) < 2:
                continue
            order = [position[user] for user in users]
            if all(a < b for a, b in itertools.pairwise(order)):
                continue
            in_graph_order = sorted(users, key=position.__getitem__)
            users.clear()
            users.update(dict.fromkeys(in_graph_order))

    @staticmethod
    def _key(node: Node) -> tuple[Any, ...]:
        """What a node's value depends on: target, arguments and (by identity) its input values."""
        values = tuple(n.meta.get("val") for n in node.all_input_nodes)
        return (node.target, node.args, tuple(node.kwargs.items()), values, node.meta.get("val"))

    @staticmethod
    def _same(old: tuple[Any, ...], new: tuple[Any, ...]) -> bool:
        if old[0] is not new[0] or old[4] is not new[4] or len(old[3]) != len(new[3]):
            return False
        if any(a is not b for a, b in zip(old[3], new[3], strict=True)):
            return False
        try:
            return bool(old[1] == new[1] and old[2] == new[2])
        except Exception:  # an argument that cannot compare: recompute
            return False

    def _refresh_node(self, node: Node) -> None:
        key = self._key(node)
        old = self._seen.get(node)
        if old is not None and self._same(old, key):
            return
        if old is None and _reusable(node) and is_vouched(node):
            # pass-infra vouches that this value is what its op gives on its inputs' current
            # values (unchanged op, args, kwargs, value and input values since a replay made it
            # or the pipeline's input held it): a re-run would keep it, so a refresh does too.
            self._seen[node] = key
            return
        args, kwargs = pytree.tree_map_only(
            Node, lambda n: n.meta.get("val"), (node.args, node.kwargs)
        )
        target: Callable[..., Any] = node.target
        if (
            self._arm
            and target in _NO_QUANTIZED_FAKE_KERNEL
            and len(node.meta.get("input_qparams", {})) > 0
        ):
            old_val = node.meta["val"]
            output_qparams = node.meta.get("output_qparams", {})
            dtype = (
                next(iter(output_qparams.values())).dtype
                if len(output_qparams) > 0
                else old_val.dtype
            )
            value = torch.empty_like(old_val, dtype=dtype)
        else:
            value = target(*args, **kwargs)
        old_val = node.meta.get("val")
        if indistinguishable(old_val, value):
            # Keep the value object: users whose inputs are otherwise unchanged stay memoized,
            # so a rewrite re-dispatches its neighbourhood, not everything downstream of it.
            value = old_val
        node.meta["val"] = value
        node.meta["tensor_meta"] = pytree.tree_map(
            lambda x: None if isinstance(x, FakeTensor) or not isinstance(x, torch.Tensor) else x,
            value,
        )
        self._seen[node] = self._key(node)


def _eliminate_dead_code(graph: torch.fx.Graph) -> None:
    """``graph.eliminate_dead_code()`` then ``graph.lint()``, as upstream's re-trace does.

    The elimination (it lints first) runs only when some node could be dead: one with no
    users that is not a placeholder or the output, which it always keeps. Otherwise it would
    remove nothing, and the one lint checks what its two would.
    """
    if any(not node.users and node.op not in ("placeholder", "output") for node in graph.nodes):
        graph.eliminate_dead_code()
    graph.lint()


def _reusable(node: Node) -> bool:
    """A node whose recorded value a replay may keep: a static fake tensor of a functional op
    ArmPass dispatches as it is (not one of its no-fake-kernel special cases)."""
    val = node.meta.get("val")
    schema = getattr(node.target, "_schema", None)
    return (
        type(val) is FakeTensor
        and all(type(d) is int for d in val.shape)
        and node.target not in _NO_QUANTIZED_FAKE_KERNEL
        and not (schema is not None and schema.is_mutable)
    )


class _ReplayAsRefresh(ExportPass):
    """Placed after an upstream helper pass in the MRO: its closing ``super().call`` re-run refreshes instead."""

    lowerkit_refresher: _Refresher | None = None

    def call(self, graph_module: GraphModule) -> PassResult:
        refresher = self.lowerkit_refresher
        if refresher is None:
            refresher = _Refresher(False)
        try:
            refresher.refresh(graph_module)
        except _RefreshUnsupported:
            return ExportPass.call(self, graph_module)
        return PassResult(graph_module, True)


class _FuseDuplicateUsers(FuseDuplicateUsersPass, _ReplayAsRefresh):
    pass


class _FuseIdenticalInputTransforms(FuseIdenticalInputTransformsPass, _ReplayAsRefresh):
    pass


class _CanonicalizeViewCopyPermute(CanonicalizeViewCopyPermutePass, _ReplayAsRefresh):
    pass


class _RemovePermutesAroundElementwiseTosaOps(
    RemovePermutesAroundElementwiseTosaOps, _ReplayAsRefresh
):
    pass


class _IncrementalMixin:
    """Overrides of the upstream propagation pass: cheap intermediate re-runs, one real one at the end."""

    _incremental_refresher: _Refresher | None = None

    def _helper(self, helper: Any) -> Any:
        helper.lowerkit_refresher = self._incremental_refresher
        return helper

    def _retrace(self, graph_module: GraphModule) -> GraphModule:
        refresher = self._incremental_refresher
        if refresher is None:
            return super()._retrace(graph_module)  # type: ignore[misc]
        _eliminate_dead_code(graph_module.graph)
        try:
            refresher.refresh(graph_module)
        except _RefreshUnsupported:
            return ExportPass.call(self, graph_module).graph_module
        return graph_module

    def make_fusion_pass(self) -> ExportPass | None:
        if self.exported_program is None:  # type: ignore[attr-defined]
            return None
        if self._incremental_refresher is None:
            return super().make_fusion_pass()  # type: ignore[misc]
        return self._helper(
            _RemovePermutesAroundElementwiseTosaOps(self.exported_program)  # type: ignore[attr-defined]
        )

    def fuse_vertical(self, graph_module: GraphModule) -> PassResult:
        if self._incremental_refresher is None:
            return super().fuse_vertical(graph_module)  # type: ignore[misc]
        modified = False
        fusion_pass = self.make_fusion_pass()
        if fusion_pass is not None:
            result = fusion_pass.call(graph_module)
            graph_module = result.graph_module
            modified |= result.modified
        result = self._helper(
            _CanonicalizeViewCopyPermute(_upstream.permute_targets(self))
        ).call(graph_module)
        graph_module = result.graph_module
        modified |= result.modified
        return PassResult(graph_module, modified)

    def _horizontal_fusion(self) -> ExportPass:
        """The helper pass `fuse_horizontal` runs (the Up and Down passes fuse differently)."""
        raise NotImplementedError

    def fuse_horizontal(self, graph_module: GraphModule) -> PassResult:
        if self._incremental_refresher is None:
            return super().fuse_horizontal(graph_module)  # type: ignore[misc]
        result = self._helper(self._horizontal_fusion()).call(graph_module)
        return PassResult(result.graph_module, result.modified)

    def call(self, graph_module: GraphModule) -> PassResult:
        self._incremental_refresher = _Refresher(True)
        try:
            result = super().call(graph_module)  # type: ignore[misc]
        finally:
            self._incremental_refresher = None
        if not result.modified:
            return result
        graph_module = result.graph_module
        _eliminate_dead_code(graph_module.graph)
        return PassResult(ExportPass.call(self, graph_module).graph_module, True)


class IncrementalPropagateViewCopyPermuteUpPass(
    _IncrementalMixin, _upstream.PropagateViewCopyPermuteUpPass
):
    """PropagateViewCopyPermuteUpPass with in-place metadata refresh instead of whole-graph re-runs."""

    def _horizontal_fusion(self) -> ExportPass:
        return _FuseDuplicateUsers(self.duplicate_user_fusion_exclusions())


class IncrementalPropagateViewCopyPermuteDownPass(
    _IncrementalMixin, _upstream.PropagateViewCopyPermuteDownPass
):
    """PropagateViewCopyPermuteDownPass with in-place metadata refresh instead of whole-graph re-runs."""

    def _horizontal_fusion(self) -> ExportPass:
        return _FuseIdenticalInputTransforms(permute_targets=_upstream.permute_targets(self))


_INCREMENTAL: dict[type, type] = {
    _upstream.PropagateViewCopyPermuteUpPass: IncrementalPropagateViewCopyPermuteUpPass,
    _upstream.PropagateViewCopyPermuteDownPass: IncrementalPropagateViewCopyPermuteDownPass,
}


def incremental_version(graph_pass: Any) -> Any:
    """The incremental drop-in for an upstream propagation pass instance (same state), else the pass itself."""
    replacement = _INCREMENTAL.get(type(graph_pass))
    if replacement is None:
        return graph_pass
    clone: Any = object.__new__(replacement)
    clone.__dict__.update(graph_pass.__dict__)
    return clone


# Upstream's Arm duplicate-user exclusions; imported so a rename upstream fails at import time.
assert TOSA_EXCLUDED_TARGETS
