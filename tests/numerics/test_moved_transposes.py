"""debug_arm where the Arm pipeline moves a conv's layout transpose past the ops that follow it.

On `residual` (a ResNet block's end at 2x2 spatial) the main conv's NHWC -> NCHW TRANSPOSE ends
up after the add and the ReLU, still named after the conv: read as the conv's tensor, it showed
the block's output against the conv's and named the conv a culprit (138 quanta "TOSA vs
quantized", while the TOSA output equals the fake-quant program's).
"""

from __future__ import annotations

from lowerkit.arm_passes.numerics.debug import TOSA_VS_QUANTIZED, debug_arm
from numerics.models import residual


def test_tosa_int_layers_match_the_fake_quant_program() -> None:
    model, inputs = residual()
    report = debug_arm(model, inputs, "TOSA-1.0+INT", scan=0, search=0, model_name="residual")
    assert report.summary["tosa_vs_quantized_output"]["max_error_quanta"] <= 1.0
    compared = {x.name: x.stages[TOSA_VS_QUANTIZED] for x in report.layers if TOSA_VS_QUANTIZED in x.stages}
    # A quantum or two of integer-rescale rounding at most (the conv read as the block's output: 138).
    assert all(error.max_error_quanta is not None and error.max_error_quanta <= 2.0 for error in compared.values()), compared
    assert report.first_over_threshold is None and report.bisection is None
    # The add is compared too: its tensor no longer seems computed before the conv's.
    assert {"main", "shortcut", "add"} <= set(compared), report.notes


def test_tosa_fp_ops_match_eager() -> None:
    model, inputs = residual()
    report = debug_arm(model, inputs, "TOSA-1.0+FP", model_name="residual")
    assert all(x.error.sqnr_db > 100.0 for x in report.layers), report.layers
    assert {"main", "shortcut", "add"} <= {x.name for x in report.layers}, report.notes
