"""Unpatched ExecuTorch CoreMLQuantizer (~35 s a prepare) equals the memoized one the other tests use.

tests/BUILD runs this file on torch's scalar kernels (``ATEN_CPU_CAPABILITY=default``), so it also
proves lowerkit's quantizer equals ExecuTorch's there; test_sameness.py proves it on the
machine's own kernels for every zoo model and config.
"""

from __future__ import annotations

from executorch.backends.apple.coreml.quantizer import CoreMLQuantizer as UpstreamQuantizer

from golden import coreml_quantizer as golden
from lowerkit.coreml_quantizer import CoreMLQuantizer

MODEL, CONFIG = "conv_linear", "static_per_channel"


def test_unpatched_upstream_equals_memoized_upstream_and_lowerkit() -> None:
    # Upstream's getters trace every pattern each time they are called (nothing memoized); a deep
    # copy of each pattern's first trace is kept, and the memoized run below hands out copies of
    # those (the memo otherwise traces each pattern once itself: the same trace, ~40 s more).
    with golden.upstream_pattern_getters(on_build=golden.seed_pattern_memo):
        unpatched = golden.outcome(MODEL, CONFIG, UpstreamQuantizer)
    with golden.upstream_pattern_getters(memoize=True):
        memoized = golden.outcome(MODEL, CONFIG, UpstreamQuantizer)
    lowerkit = golden.outcome(MODEL, CONFIG, CoreMLQuantizer)
    assert "error" not in unpatched, unpatched.get("error")
    assert memoized == unpatched
    assert lowerkit == unpatched
