"""lowerkit's CoreMLQuantizer against ExecuTorch's, both run here, now, on the same input.

For every zoo model and config, the model is exported, prepared, calibrated and converted
once with ExecuTorch's ``CoreMLQuantizer`` and once with lowerkit's, in this process: the
converted graphs' code and a sha256 of every tensor in them (weights, qparams, constants)
must be equal, or, where upstream fails, lowerkit must fail with the same error. Nothing is
compared with values recorded elsewhere: calibration runs float kernels whose last bits
depend on the CPU (AVX-512, AVX2, scalar), so the scales are only comparable within one run.

ExecuTorch's quantizer runs with its pattern getters memoized (``upstream_pattern_getters``:
each pattern traced once, deep copies handed out), which takes a prepare from 30-45 s to about
a second; test_live_upstream.py proves on a case that unpatched upstream gives the same.

The pattern tables (which patterns upstream traces, in which order, with which graphs) are
code, not float arithmetic: they stay recorded in goldens/patterns.json.
"""

from __future__ import annotations

import contextlib
import warnings
from typing import Any

import pytest
from executorch.backends.apple.coreml.quantizer import CoreMLQuantizer as UpstreamQuantizer
from executorch.backends.apple.coreml.test.test_coreml_quantizer import _get_quantization_config

from coreml_quantizer.conftest import load_golden, memoized_torchao_qat_patterns
from golden import coreml_quantizer as golden
from lowerkit.coreml_quantizer import (
    CoreMLQuantizer,
    IgnoredConfigFieldWarning,
    PatternKey,
    all_pattern_keys,
)
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


@pytest.mark.parametrize(("model", "config"), golden.cases(), ids=lambda v: str(v))
def test_same_as_live_upstream(model: str, config: str) -> None:
    # torchao's QAT conv+bn patterns are traced once per session for both sides (torchao's
    # code, not the quantizer under test; see memoized_torchao_qat_patterns).
    qat_memo = (
        memoized_torchao_qat_patterns() if golden.is_qat(config) else contextlib.nullcontext()
    )
    with qat_memo:
        with golden.upstream_pattern_getters(memoize=True):
            expected = golden.outcome(model, config, UpstreamQuantizer)
        actual = golden.outcome(model, config, CoreMLQuantizer)
    if "error" in expected:
        assert actual.get("error") == expected["error"]
        return
    assert "error" not in actual, actual.get("error")
    assert actual["code"] == expected["code"]
    assert actual["tensors"] == expected["tensors"]
    assert expected["tensors"], "nothing was compared"


def test_executorchs_own_test_config_gives_upstreams_output_with_a_warning(monkeypatch: pytest.MonkeyPatch) -> None:
    """Drop-in: a config copied from ExecuTorch's own tests quantizes as with ExecuTorch."""
    # ExecuTorch's quantizer test config carries `milestones: [0, 0, 10, 10]`, which pt2e ignores.
    monkeypatch.setattr(golden, "make_config", lambda name: _get_quantization_config())
    with golden.upstream_pattern_getters(memoize=True):
        expected = golden.outcome("conv_linear", "static_per_channel", UpstreamQuantizer)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        actual = golden.outcome("conv_linear", "static_per_channel", CoreMLQuantizer)
    assert "error" not in expected, expected
    assert actual == expected
    ignored = [w for w in caught if issubclass(w.category, IgnoredConfigFieldWarning)]
    assert len(ignored) == 1 and "milestones" in str(ignored[0].message)


def test_pattern_goldens_match_the_installed_stack() -> None:
    recorded = load_golden("patterns.json")["versions"]
    assert recorded == golden.versions(), (
        "patterns.json was recorded with other versions; re-record it with "
        "`python -m golden.coreml_quantizer`"
    )


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
