"""lowerkit's CoreMLQuantizer against goldens recorded from ExecuTorch's CoreMLQuantizer.

For every zoo model and config: the converted graph's code and a sha256 of every
tensor in it (weights, qparams, constants) must equal upstream's, or, where
upstream fails, lowerkit must fail with the same error. The patterns lowerkit
builds must be upstream's, in upstream's order, with the same ops and graphs.
"""

from __future__ import annotations

import contextlib
from typing import Any

import pytest

from coreml_quantizer.conftest import load_golden, memoized_torchao_qat_patterns
from golden import coreml_quantizer as golden
from lowerkit.coreml_quantizer import CoreMLQuantizer, PatternKey, all_pattern_keys
from lowerkit.coreml_quantizer.anchors import pattern_ops
from lowerkit.coreml_quantizer.patterns import trace_pattern

_GETTERS = {
    "conv": "get_conv_pattern",
    "conv_bn": "get_conv_bn_pattern",
    "linear": "get_linear_pattern",
    "linear_bn": "get_linear_bn_pattern",
    "binary_op": "get_binary_op_act_pattern",
}


def descriptor(key: PatternKey) -> list[Any]:
    """The golden tool's description of the upstream getter call for ``key``."""
    act = golden.function_name(key.act_fn) if key.act_fn is not None else None
    op: list[Any] = [] if key.kind in ("linear", "linear_bn") else [golden.function_name(key.op)]
    return [_GETTERS[key.kind], *op, act, key.act_in_place]


def test_goldens_match_the_installed_stack() -> None:
    recorded = load_golden("patterns.json")["versions"]
    assert recorded == golden.versions(), (
        "goldens were recorded with other versions; re-record them with "
        "`python -m golden.coreml_quantizer`"
    )


@pytest.mark.parametrize(("model", "config"), golden.cases(), ids=lambda v: str(v))
def test_same_as_upstream(model: str, config: str) -> None:
    expected = load_golden(golden.golden_path(golden.DEFAULT_OUT, model, config).name)
    qat_memo = (
        memoized_torchao_qat_patterns() if golden.is_qat(config) else contextlib.nullcontext()
    )
    with qat_memo:
        actual = golden.outcome(model, config, CoreMLQuantizer)
    if "error" in expected:
        assert actual.get("error") == expected["error"]
        return
    assert "error" not in actual, actual.get("error")
    assert actual["code"] == expected["code"]
    assert actual["tensors"] == expected["tensors"]


def test_patterns_are_upstreams_in_upstreams_order() -> None:
    recorded = load_golden("patterns.json")["patterns"]
    keys = all_pattern_keys()
    assert [descriptor(k) for k in keys] == [r["pattern"] for r in recorded]
    for key, record in zip(keys, recorded, strict=True):
        # The op tables let the quantizer skip patterns; they must be exact.
        assert sorted(str(op) for op in pattern_ops(key)) == record["ops"], key.describe()


def test_pattern_graphs_are_upstreams() -> None:
    recorded = load_golden("patterns.json")["patterns"]
    keys = all_pattern_keys()
    # Every 5th pattern (81 of 405: each activation, op, dimension and batch-norm variant).
    for key, record in list(zip(keys, recorded, strict=True))[::5]:
        assert trace_pattern(key).code == record["code"], key.describe()
