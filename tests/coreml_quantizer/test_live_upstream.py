"""Unpatched ExecuTorch CoreMLQuantizer (~35 s a prepare) equals the memoized one the other tests use."""

from __future__ import annotations

from executorch.backends.apple.coreml.quantizer import CoreMLQuantizer as UpstreamQuantizer

from golden import coreml_quantizer as golden
from lowerkit.coreml_quantizer import CoreMLQuantizer

MODEL, CONFIG = "conv_linear", "static_per_channel"


def test_unpatched_upstream_equals_memoized_upstream_and_lowerkit() -> None:
    unpatched = golden.outcome(MODEL, CONFIG, UpstreamQuantizer)
    with golden.upstream_pattern_getters(memoize=True):
        memoized = golden.outcome(MODEL, CONFIG, UpstreamQuantizer)
    lowerkit = golden.outcome(MODEL, CONFIG, CoreMLQuantizer)
    assert "error" not in unpatched, unpatched.get("error")
    assert memoized == unpatched
    assert lowerkit == unpatched
