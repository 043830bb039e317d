"""ExecuTorch's Core ML annotators, in its registry order, with the patterns each one tries.

An annotator is either a sequence of patterns (``PatternKey`` and the routine that
annotates its matches) or a set of unary ops found by source partition. Running an
annotator builds (from `pattern_cache`) only the patterns whose ops are all in the model.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

import torch
from torch.fx import GraphModule, Node

from lowerkit.coreml_quantizer._upstream import AVG_POOL2D_C, AVG_POOL3D_C
from lowerkit.coreml_quantizer.anchors import GraphOps
from lowerkit.coreml_quantizer.annotate import (
    annotate_binary_op_act_pattern,
    annotate_unary_shared_observer_ops,
    annotate_weighted_mod_pattern,
)
from lowerkit.coreml_quantizer.annotation_config import AnnotationConfig
from lowerkit.coreml_quantizer.filters import NodeFilter
from lowerkit.coreml_quantizer.pattern_cache import PatternCache
from lowerkit.coreml_quantizer.patterns import (
    ACTIVATIONS,
    ACTIVATIONS_NO_INPLACE,
    ADD_OPS,
    MATMUL_OPS,
    MUL_OPS,
    PatternKey,
)

PatternRoutine = Callable[
    [GraphModule, GraphModule, AnnotationConfig | None, NodeFilter | None], list[list[Node]]
]

_CONV_DIMS = (1, 2, 3)


@dataclass(frozen=True)
class Annotator:
    """One of ExecuTorch's registered annotators: its name and what it matches."""

    name: str
    #: The patterns tried, in order (empty for a unary-op annotator).
    patterns: tuple[PatternKey, ...] = ()
    #: Unary ops annotated to share their input's observer (empty for a pattern annotator).
    unary_ops: tuple[Callable[..., Any], ...] = field(default=())

    @property
    def routine(self) -> PatternRoutine:
        """The routine that annotates matches of this annotator's patterns."""
        if self.patterns and self.patterns[0].kind == "binary_op":
            return annotate_binary_op_act_pattern
        return annotate_weighted_mod_pattern

    def run(
        self,
        model: GraphModule,
        config: AnnotationConfig | None,
        filter_fn: NodeFilter | None,
        model_ops: GraphOps,
        cache: PatternCache,
    ) -> list[list[Node]]:
        """Annotate ``model``; patterns that ``model_ops`` shows cannot match are not built."""
        if self.unary_ops:
            return annotate_unary_shared_observer_ops(
                model, list(self.unary_ops), config, filter_fn
            )
        routine = self.routine
        partitions: list[list[Node]] = []
        for key in self.patterns:
            if model_ops.can_match(key):
                partitions.extend(routine(model, cache.get(key), config, filter_fn))
        return partitions


def _act_variants() -> Iterator[tuple[Callable[..., Any], bool]]:
    """(act_fn, in_place) in ExecuTorch's order: with-inplace activations x (True, False), then the rest."""
    yield from itertools.product(ACTIVATIONS, (True, False))
    for act_fn in ACTIVATIONS_NO_INPLACE:
        yield act_fn, False


def _conv_act_patterns(kind: str) -> tuple[PatternKey, ...]:
    keys = [
        PatternKey(kind, dim, act_fn, in_place)  # type: ignore[arg-type]
        for dim, (act_fn, in_place) in itertools.product(_CONV_DIMS, _act_variants_inplace())
    ]
    keys += [
        PatternKey(kind, dim, act_fn, False)  # type: ignore[arg-type]
        for dim, act_fn in itertools.product(_CONV_DIMS, ACTIVATIONS_NO_INPLACE)
    ]
    return tuple(keys)


def _act_variants_inplace() -> Iterator[tuple[Callable[..., Any], bool]]:
    return itertools.product(ACTIVATIONS, (True, False))


def _linear_act_patterns(kind: str) -> tuple[PatternKey, ...]:
    return tuple(
        PatternKey(kind, None, act_fn, in_place)  # type: ignore[arg-type]
        for act_fn, in_place in _act_variants()
    )


def _binary_act_patterns(ops: tuple[Callable[..., Any], ...]) -> tuple[PatternKey, ...]:
    keys = [
        PatternKey("binary_op", op, act_fn, in_place)
        for op, (act_fn, in_place) in itertools.product(ops, _act_variants_inplace())
    ]
    keys += [
        PatternKey("binary_op", op, act_fn, False)
        for op, act_fn in itertools.product(ops, ACTIVATIONS_NO_INPLACE)
    ]
    return tuple(keys)


def _plain(kind: str, ops: tuple[Any, ...]) -> tuple[PatternKey, ...]:
    return tuple(PatternKey(kind, op) for op in ops)  # type: ignore[arg-type]


nn = torch.nn
F = torch.nn.functional

#: ExecuTorch 1.5.1's ``_AnnotationPatternRegistry``, in registration order.
ANNOTATORS: tuple[Annotator, ...] = (
    Annotator("conv_act", _conv_act_patterns("conv")),
    Annotator("conv_bn_act", _conv_act_patterns("conv_bn")),
    Annotator("conv_bn", _plain("conv_bn", _CONV_DIMS)),
    Annotator("conv", _plain("conv", _CONV_DIMS)),
    Annotator("linear_act", _linear_act_patterns("linear")),
    Annotator("linear_bn_act", _linear_act_patterns("linear_bn")),
    Annotator("linear_bn", (PatternKey("linear_bn"),)),
    Annotator("linear", (PatternKey("linear"),)),
    Annotator("add_act", _binary_act_patterns(ADD_OPS)),
    Annotator("add", _plain("binary_op", ADD_OPS)),
    Annotator("mul_act", _binary_act_patterns(MUL_OPS)),
    Annotator("mul", _plain("binary_op", MUL_OPS)),
    Annotator("matmul_act", _binary_act_patterns(MATMUL_OPS)),
    Annotator("matmul", _plain("binary_op", MATMUL_OPS)),
    Annotator("max_pool1d", unary_ops=(nn.MaxPool1d, F.max_pool1d, torch.max_pool1d)),
    Annotator("max_pool2d", unary_ops=(nn.MaxPool2d, F.max_pool2d, torch.max_pool2d)),
    Annotator("max_pool3d", unary_ops=(nn.MaxPool3d, F.max_pool3d, torch.max_pool3d)),
    Annotator(
        "adaptive_avg_pool1d",
        unary_ops=(nn.AdaptiveAvgPool1d, F.adaptive_avg_pool1d, torch.adaptive_avg_pool1d),
    ),
    Annotator("adaptive_avg_pool2d", unary_ops=(nn.AdaptiveAvgPool2d, F.adaptive_avg_pool2d)),
    Annotator("adaptive_avg_pool3d", unary_ops=(nn.AdaptiveAvgPool3d, F.adaptive_avg_pool3d)),
    Annotator("avg_pool1d", unary_ops=(nn.AvgPool1d, F.avg_pool1d, torch.avg_pool1d, torch.mean)),
    Annotator("avg_pool2d", unary_ops=(nn.AvgPool2d, F.avg_pool2d, AVG_POOL2D_C)),
    Annotator("avg_pool3d", unary_ops=(nn.AvgPool3d, F.avg_pool3d, AVG_POOL3D_C)),
    Annotator("flatten", unary_ops=(nn.Flatten, torch.flatten)),
)


def all_pattern_keys() -> list[PatternKey]:
    """Every pattern the annotators try, in the order ExecuTorch builds them (405)."""
    return [key for annotator in ANNOTATORS for key in annotator.patterns]
