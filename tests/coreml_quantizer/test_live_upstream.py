"""One live side-by-side run: ExecuTorch's CoreMLQuantizer (unpatched, ~35 s) vs lowerkit's."""

from __future__ import annotations

from executorch.backends.apple.coreml.quantizer import CoreMLQuantizer as UpstreamQuantizer

from coreml_quantizer.conftest import load_golden
from golden import coreml_quantizer as golden
from lowerkit.coreml_quantizer import CoreMLQuantizer

MODEL, CONFIG = "conv_linear", "static_per_channel"


def test_lowerkit_equals_live_upstream_and_the_golden() -> None:
    upstream = golden.outcome(MODEL, CONFIG, UpstreamQuantizer)
    lowerkit = golden.outcome(MODEL, CONFIG, CoreMLQuantizer)
    assert "error" not in upstream, upstream.get("error")
    assert lowerkit["code"] == upstream["code"]
    assert lowerkit["tensors"] == upstream["tensors"]
    # The goldens are recorded with upstream's pattern getters memoized; unpatched
    # upstream must give the same.
    recorded = load_golden(golden.golden_path(golden.DEFAULT_OUT, MODEL, CONFIG).name)
    assert {"code": recorded["code"], "tensors": recorded["tensors"]} == upstream
