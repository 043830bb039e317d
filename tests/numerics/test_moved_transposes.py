"""debug_arm where the Arm pipeline moves a conv's layout change past the ops that follow it.

On `residual` (two ResNet block ends) the last conv's NHWC -> NCHW TRANSPOSE (a RESHAPE at 1x1
spatial) ends up after the add and the ReLU, still named after the conv: read as the conv's
tensor, it showed the block's output against the conv's and named the conv a culprit (at 2x2:
114 quanta "TOSA vs quantized", -2.8 dB on TOSA FP, while the TOSA output equals the
fake-quant program's).
"""

from __future__ import annotations

import pytest

from lowerkit.arm_passes.numerics.debug import TOSA_VS_QUANTIZED, debug_arm
from numerics.models import residual

#: The layers of `residual`: each block's two convs, its add and its ReLU.
LAYERS = 8


@pytest.mark.parametrize("size", [2, 1])
def test_tosa_int_layers_match_the_fake_quant_program(size: int) -> None:
    model, inputs = residual(size)
    report = debug_arm(model, inputs, "TOSA-1.0+INT", scan=0, search=0, model_name="residual")
    assert report.summary["tosa_vs_quantized_output"]["max_error_quanta"] <= 1.0
    compared = {x.name: x.stages[TOSA_VS_QUANTIZED] for x in report.layers if TOSA_VS_QUANTIZED in x.stages}
    # A quantum or two of integer-rescale rounding at most.
    assert all(error.max_error_quanta is not None and error.max_error_quanta <= 2.0 for error in compared.values()), compared
    assert report.first_over_threshold is None and report.bisection is None
    # Every layer has its TOSA tensor, the last add too (it no longer seems computed before its conv).
    assert len(report.layers) == len(compared) == LAYERS, report.notes


@pytest.mark.parametrize("size", [2, 1])
def test_tosa_fp_ops_match_eager(size: int) -> None:
    model, inputs = residual(size)
    report = debug_arm(model, inputs, "TOSA-1.0+FP", model_name="residual")
    assert all(x.error.sqnr_db > 100.0 for x in report.layers), report.layers
    assert len(report.layers) == LAYERS, report.notes
