"""CoreMLQuantizer builds only patterns that can match, once per process, with the same result."""

from __future__ import annotations

import operator

import pytest
import torch
import torch.nn.functional as F
from torchao.quantization.pt2e.quantizer.quantizer import Q_ANNOTATION_KEY

from coreml_quantizer_tests.conftest import (
    exported,
    fingerprint,
    quantize,
    static_config,
    weight_only_config,
)
from lowerkit.coreml_quantizer import CoreMLQuantizer, PatternKey, pattern_cache
from lowerkit.coreml_quantizer.anchors import GraphOps, pattern_ops


def test_only_patterns_chained_in_the_model_are_built(fresh_cache: None) -> None:
    quantize("linear", CoreMLQuantizer(static_config()))
    # linear -> gelu, matmul, mul, add -> sigmoid, matmul, linear: each op, alone or with
    # the activation that follows it; operator.add and torch.add trace to the same op.
    expected = {
        PatternKey("linear", None, F.gelu),
        PatternKey("linear"),
        PatternKey("binary_op", operator.add, F.sigmoid),
        PatternKey("binary_op", torch.add, F.sigmoid),
        PatternKey("binary_op", operator.add),
        PatternKey("binary_op", torch.add),
        PatternKey("binary_op", operator.mul),
        PatternKey("binary_op", torch.mul),
        PatternKey("binary_op", torch.matmul),
    }
    assert set(_cached_keys()) == expected
    assert pattern_cache.stats().builds == len(expected)


def test_second_quantization_builds_nothing_and_is_identical(fresh_cache: None) -> None:
    first = fingerprint(quantize("conv", CoreMLQuantizer(static_config())))
    builds = pattern_cache.stats().builds
    second = fingerprint(quantize("conv", CoreMLQuantizer(static_config())))
    stats = pattern_cache.stats()
    assert stats.builds == builds
    assert stats.hits >= builds
    assert first == second


@pytest.mark.parametrize("model", ["conv", "linear"])
def test_chain_filter_annotates_like_the_op_set_filter(
    model: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Skipping unchained patterns changes nothing: compare with building every pattern whose
    ops all occur in the model (a filter that is exact, given the op tables test)."""
    expected = fingerprint(quantize(model, CoreMLQuantizer(static_config())))

    def op_set_filter(self: GraphOps, key: object) -> bool:
        return pattern_ops(key) <= set(self.by_target)  # type: ignore[arg-type]

    monkeypatch.setattr(GraphOps, "can_match", op_set_filter)
    assert fingerprint(quantize(model, CoreMLQuantizer(static_config()))) == expected


def test_annotations_follow_the_config() -> None:
    model = exported("conv")
    model = CoreMLQuantizer(weight_only_config()).annotate(model)
    conv = next(n for n in model.graph.nodes if n.target == torch.ops.aten.conv2d.default)
    annotation = conv.meta[Q_ANNOTATION_KEY]
    weight_spec = annotation.input_qspec_map[conv.args[1]]
    assert weight_spec.qscheme == torch.per_channel_symmetric
    assert weight_spec.dtype == torch.int8
    assert annotation.input_qspec_map[conv.args[0]] is None


def test_weight_only_inserts_no_activation_quantization() -> None:
    code = quantize("conv", CoreMLQuantizer(weight_only_config())).code
    assert "dequantize_per_channel" in code
    assert "quantize_per_tensor" not in code


def _cached_keys() -> list[object]:
    return list(pattern_cache._patterns)
