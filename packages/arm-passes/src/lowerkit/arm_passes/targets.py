"""The audited target table: for every pass class in the Arm pipelines (the backend's, and the Arm
quantizer's ``transform_for_annotation``), its targeted ops or why it is whole-graph.

A pass's targets come from upstream's own class attributes (``target_ops`` and friends, read
by ``lowerkit.pass_infra.discover_targeted_ops``), or from ``LISTED_TARGETS`` here; a pass
with neither must appear in ``WHOLE_GRAPH`` with a one-line reason. ``audit`` reports every
pass class that is in none of them, so an ExecuTorch upgrade that adds or renames a pass
fails loudly (see the package tests).
"""

from __future__ import annotations

import functools
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from lowerkit.pass_infra.framework.discovery import discover_targeted_ops

__all__ = [
    "LISTED_TARGETS",
    "REPLAY_AFTER_IN_PLACE_EDITS",
    "WHOLE_GRAPH",
    "WHOLE_GRAPH_REPLAYS",
    "PassTargets",
    "audit",
    "no_quantized_fake_kernel_ops",
    "targets_of",
]

#: Passes whose upstream class has no target attribute, with the ops lowerkit lists for them.
#: Keyed by class name; values are resolved lazily (op namespaces load with the backend):
#: ``aten.*`` under ``torch.ops``, the rest under ExecuTorch's ``exir_ops``.
LISTED_TARGETS: dict[str, tuple[str, ...]] = {
    # the ops its call() rewrites: its own torch_ops and ComputeConstantOpsAOTPass.targeted_ops
    "ConvertInt64ConstOpsToInt32Pass": (
        "aten.full.default", "aten.arange.default", "aten.arange.start", "aten.arange.start_step",
        "aten.eye.default", "aten.linspace.default", "edge.aten.full.default", "edge.aten.arange.start_step",
        "edge.aten.eye.default", "edge.aten.linspace.default", "aten.scalar_tensor.default",
    ),
}  # fmt: skip

#: Passes that must replay the whole graph, each with the reason.
WHOLE_GRAPH: dict[str, str] = {
    "NormalizeDelegateIOLayoutPass": "rewrites delegate inputs/outputs (placeholders and output), not call_function ops",
    "FuseQuantizedActivationPass": "matches activation-after-quantized-op patterns by walking producers of any op",
    "ConvertELUParamsPass": "overrides call() and rewrites ELU parameters found via graph walk and qparams meta",
    "ControlFlowConstInlinePass": "inlines constants into cond/while bodies: works on nested graph modules",
    "NormalizeWhileInitialArgsPass": "rewrites while_loop initial args across nested graph modules",
    "FoldAndAnnotateQParamsPass": "folds every q/dq pair into the metadata of all neighbouring ops",
    "FuseConsecutiveClampsPass": "overrides call() and fuses clamp chains found by walking users",
    "FuseDuplicateUsersPass": "compares every producer's users of any op kind",
    "InsertRescaleInt32Pass": "inserts rescales around any op carrying int32 qparams in meta",
    "FuseConsecutiveRescalesPass": "walks rescale chains inserted by the previous pass, any producer",
    "InsertControlFlowRescalesPass": "rescales cond/while operands across nested graph modules",
    "DecomposeQuantNodesPass": "decomposes q/dq nodes left anywhere, including graph inputs/outputs",
    "QuantizeClampArgumentsPass": "rewrites clamp bounds using the qparams meta of their producers",
    "RemoveGetItemPass": "rewrites getitem of multi-output ops (getitem is not an op overload)",
    "FuseBatchNorm2dPass": "folds batch-norm into the preceding conv's parameters in the exported program",
    "DecomposeEmbeddingPass": "overrides call() with its own graph walk and index-shape checks",
    "CastInt64BuffersToInt32Pass": "casts int64 buffers/constants: placeholders and state_dict, not ops",
    "ReplaceScalarWithTensorByProfilePass": "replaces scalar arguments of any op by tensors, per TOSA profile",
    "UnsqueezeScalarPlaceholdersPass": "reshapes rank-0 placeholders and their constants in the exported program",
    "ConvertMmToBmmPass": "overrides call() and rewrites mm with views around it via graph walk",
    "DecomposeAnyPass": "overrides call() with a graph walk over any/any.dim/any.dims nodes",
    "UnsqueezeBeforeRepeatPass": "overrides call() and inserts views before repeat via graph walk",
    "DecomposeCumsumPass": "overrides call() and edits cumsum with new constant placeholders",
    "SizeAdjustInputPass": "adjusts inputs of conv/pool by inspecting shapes of every producer",
    "FuseConstantArgsPass": "folds any op whose inputs are all constants into a new constant placeholder",
    "InsertTableOpsPass": "replaces any quantized unary op with a TABLE via its qparams meta",
    "FoldScalarMulIntoConvPass": "folds mul-by-scalar into conv weights in the exported program",
    "RewriteConvPass": "overrides call() and rewrites every conv with its weights and qparams",
    "RewriteMatmulPass": "overrides call() and rewrites matmul/bmm with rescales via qparams meta",
    "FuseViewCopyTransformPass": "overrides call() and fuses view chains found by walking users",
    "PropagateViewCopyPermuteDownPass": "fixpoint permute/view propagation across any elementwise op (run incrementally by lowerkit)",
    "PropagateViewCopyPermuteUpPass": "fixpoint permute/view propagation across any elementwise op (run incrementally by lowerkit)",
    "MoveDataMovementOpsToSmallerDtypePass": "moves data-movement ops past casts by inspecting every producer's dtype",
    "FuseConsecutiveSlicesPass": "overrides call() and fuses slice chains found by walking users",
    "CanonicalizeViewCopyPermutePass": "collects view/permute chains of any length and rewrites them in place",
    "FuseEqualPlaceholdersPass": "merges equal constant placeholders: placeholders, not ops",
    "NormalizeTransformInputPlaceholdersPass": "renames placeholders feeding transforms: placeholders, not ops",
    "ExirToTosaPass": "converts every edge op to its TOSA dialect op",
    "SymbolicToTosaShapesPass": "rewrites symbolic shape expressions of any op",
    "InsertRescalePass": "inserts RESCALE wherever qparams meta of any op differ from its inputs'",
    "EnsureUniqueOutputNodesPass": "rewrites the output node's arguments, not call_function ops",
    # transform_for_annotation only:
    "RemoveGraphAssertsPass": "erases assert and range-constraint nodes in place (no replay to target)",
    "ConstantFoldingPass": "folds constant subgraphs of any op with torch's export constant folding",
    "ConvertInt64OutputOpsToInt32Pass": "rewrites or removes any op with an int64 output",
    "InsertInt32CastsAfterInt64PlaceholdersPass": "inserts casts after int64 placeholders: placeholders, not ops",
    "DecomposeScaledDotProductAttentionPass": "overrides call() and decomposes SDPA through a whole-graph trace",
    "DecomposeGruPass": "overrides call() and expands GRU nodes with a graph walk",
    "DecomposeLstmPass": "overrides call() and expands LSTM nodes with a graph walk",
    "DecomposeRnnPass": "overrides call() and expands RNN nodes with a graph walk",
    "ReplaceInfAndLimitValuesPass": "rewrites infinite and limit values in the arguments of any op",
    "DeduplicateGetAttrPass": "renames duplicate get_attr nodes: attributes, not ops",
    # VGF only (inserted by VgfBackend.preprocess):
    "InsertGridSamplerGridDequantPass": "overrides call() and inserts dequantizes on grid_sampler grids via graph walk",
    "FuseGridSamplerFlowOffsetPass": "overrides call() and matches q/dq, expand, linspace and cat chains feeding grid_sampler",
}

#: Targeted passes that override ``call()`` and still fast-copy their untargeted nodes: each edits
#: the graph in place and then replays it with ExportPass's own ``call()`` (``super().call``), the
#: replay fast-copy stands in for. Nodes the edit touched (or whose inputs it rewired) are no longer
#: vouched for, so they replay and re-dispatch as stock; the package tests read each ``call()``.
REPLAY_AFTER_IN_PLACE_EDITS: frozenset[str] = frozenset(
    {
        "BroadcastArgsPass", "ComputeConstantOpsAOTPass", "ConvertInt64ConstOpsToInt32Pass", "ConvertMinMaxPass",
        "ConvertSplitToSlicePass",
        "DecomposeBatchNormNoStatsPass", "DecomposeGroupNormPass", "DecomposeLayerNormPass", "DecomposeLinearPass",
        "DecomposeSelectPass", "DecomposeUnsupportedBilinearResizePass", "FuseIdenticalInputTransformsPass",
        "InsertConstShapesPass", "MatchArgDtypePass", "MatchArgRanksPass", "RemoveNoopPass",
        "RewriteBoolToFp32CastViaInt8Pass", "RewriteMXFPConv2dPass", "RewriteMXFPLinearPass", "RewriteUpsamplePass",
        "ScalarsToAttributePass",
    }
)  # fmt: skip


#: Whole-graph passes whose ``call()`` edits the graph in place and then replays it once with
#: ExportPass's own ``call()`` (``super().call``), with no ``call_operator`` of their own: the replay
#: re-creates every node as it is. They always run, and fast-copy every node pass-infra still vouches
#: for; edited nodes, and users of nodes whose values changed, replay as stock. The replay's
#: ``call_operator`` is ArmPass's, which treats `no_quantized_fake_kernel_ops` specially: those replay.
#: Passes that rewrite nested (control-flow) graphs are not in it. The package tests read each ``call()``.
WHOLE_GRAPH_REPLAYS: frozenset[str] = frozenset(
    {
        "CanonicalizeViewCopyPermutePass", "CastInt64BuffersToInt32Pass", "ConvertELUParamsPass", "DecomposeAnyPass",
        "DecomposeCumsumPass", "DecomposeEmbeddingPass", "DecomposeQuantNodesPass", "EnsureUniqueOutputNodesPass",
        "ExirToTosaPass", "FoldAndAnnotateQParamsPass", "FuseBatchNorm2dPass", "FuseConsecutiveClampsPass",
        "FuseConsecutiveRescalesPass", "FuseConstantArgsPass", "FuseDuplicateUsersPass", "FuseEqualPlaceholdersPass",
        "FuseQuantizedActivationPass", "FuseViewCopyTransformPass", "InsertRescaleInt32Pass", "InsertRescalePass",
        "InsertTableOpsPass", "MoveDataMovementOpsToSmallerDtypePass", "NormalizeDelegateIOLayoutPass",
        "QuantizeClampArgumentsPass", "RemoveGetItemPass", "RewriteConvPass", "RewriteMatmulPass",
        "SizeAdjustInputPass", "UnsqueezeBeforeRepeatPass", "UnsqueezeScalarPlaceholdersPass",
    }
)  # fmt: skip


@functools.cache
def no_quantized_fake_kernel_ops() -> frozenset[Any]:
    """The ops ``ArmPass.call_operator`` gives an ``empty_like`` value instead of dispatching, when quantized."""
    return frozenset({_resolve("edge.aten.bmm.default"), _resolve("edge.aten.leaky_relu.default")})


@dataclass(frozen=True)
class PassTargets:
    """A pass class's entry: its targeted ops (and where they came from) or a whole-graph reason."""

    name: str
    ops: tuple[Any, ...] | None
    source: str
    reason: str | None = None


def _resolve(spec: str) -> Any:
    """Resolve a dotted op name: ``aten.*`` under ``torch.ops``, else under ``exir_ops`` (``edge.aten.mm.default``)."""
    import torch

    from lowerkit.arm_passes._upstream import exir_ops

    obj: Any = torch.ops if spec.startswith("aten.") else exir_ops
    for part in spec.split("."):
        obj = getattr(obj, part)
    return obj


def targets_of(graph_pass: Any) -> PassTargets | None:
    """The audited entry for a pass instance, or None when the table does not account for it."""
    name = type(graph_pass).__name__
    listed = LISTED_TARGETS.get(name)
    if listed is not None:
        return PassTargets(name, tuple(_resolve(s) for s in listed), "listed")
    discovered = discover_targeted_ops(graph_pass)
    if discovered:
        return PassTargets(name, tuple(discovered), "upstream")
    reason = WHOLE_GRAPH.get(name)
    if reason is not None:
        return PassTargets(name, None, "whole-graph", reason)
    return None


def audit(passes: Iterable[Any]) -> list[str]:
    """Names of pass classes in `passes` that have neither targets nor a whole-graph reason."""
    missing: list[str] = []
    for graph_pass in passes:
        name = type(graph_pass).__name__
        if targets_of(graph_pass) is None and name not in missing:
            missing.append(name)
    return missing
