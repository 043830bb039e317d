"""Unpatched ExecuTorch CoreMLQuantizer (~35 s a prepare) equals the memoized one the other tests use.

The directory runs in one process (tests/BUILD): the unpatched run here seeds the pattern memo
(each pattern's first trace, deep-copied), so test_sameness.py's memoized upstream runs hand out
copies of these traces instead of tracing all ~400 patterns again.
"""

from __future__ import annotations

from executorch.backends.apple.coreml.quantizer import CoreMLQuantizer as UpstreamQuantizer

from golden import coreml_quantizer as golden
from lowerkit.coreml_quantizer import CoreMLQuantizer

MODEL, CONFIG = "conv_linear", "static_per_channel"


def test_unpatched_upstream_equals_memoized_upstream_and_lowerkit() -> None:
    # Upstream's getters trace every pattern each time they are called (nothing memoized); a deep
    # copy of each pattern's first trace is kept, and the memoized run below (and every one of
    # test_sameness.py) hands out copies of those: every pattern it uses is a copy, so equal
    # outcomes prove the memo changes nothing. (The memo would otherwise trace each pattern once
    # itself: the same traces, ~50 s more.)
    with golden.upstream_pattern_getters(on_build=golden.seed_pattern_memo):
        unpatched = golden.outcome(MODEL, CONFIG, UpstreamQuantizer)
    with golden.upstream_pattern_getters(memoize=True):
        memoized = golden.outcome(MODEL, CONFIG, UpstreamQuantizer)
    lowerkit = golden.outcome(MODEL, CONFIG, CoreMLQuantizer)
    assert "error" not in unpatched, unpatched.get("error")
    assert memoized == unpatched
    assert lowerkit == unpatched
