"""debug_coreml (int8) on a model built to fail in a known place."""

from __future__ import annotations

import pytest

from lowerkit.coreml_preprocess.numerics import COREML_NOT_EXECUTED, debug_coreml
from lowerkit.pass_infra.numerics.report import DebugReport
from numerics.models import CULPRIT, calibration, outlier


@pytest.fixture(scope="module")
def report() -> DebugReport:
    model, inputs = outlier()
    return debug_coreml(model, inputs, calibration=calibration(), scan=3, model_name="outlier")


def test_culprit_is_named_first_and_keeping_it_float_recovers_the_output(report: DebugReport) -> None:
    assert report.culprits()[0] == CULPRIT
    layers = {x.name: x for x in report.layers}
    assert layers[CULPRIT].error.sqnr_db > 30.0 > layers["block1.2"].error.sqnr_db
    assert report.first_over_threshold is not None and report.first_over_threshold.name == "block1.2"
    best = report.sensitivity[0]
    assert best.name == CULPRIT and best.gain_db > 10.0, report.sensitivity
    assert all(s.gain_db < 1.0 for s in report.sensitivity[1:]), report.sensitivity


def test_weights_are_decoded_from_the_core_ml_model(report: DebugReport) -> None:
    weights = {x.name: x.weight_sqnr_db for x in report.layers if x.weight_sqnr_db is not None}
    assert set(weights) == {"block1", "block2", "block3", "fc"}
    # int8 per-channel weights: about 6 dB per bit, float16 storage on top.
    assert all(35.0 < value < 60.0 for value in weights.values()), weights
    assert COREML_NOT_EXECUTED in report.notes


def test_weight_only_recipes_compare_each_decoded_weight() -> None:
    from lowerkit.coreml_preprocess.numerics import debug_coreml_weights
    from numerics.models import two_linear

    model, inputs = two_linear()
    w8 = debug_coreml_weights(model, inputs, "w8", model_name="two_linear")
    w4 = debug_coreml_weights(model, inputs, "w4", model_name="two_linear")
    assert [x.name for x in w8.layers] == ["first", "second"] == [x.name for x in w4.layers]
    for eight, four in zip(w8.layers, w4.layers, strict=True):
        # About 6 dB per bit: int8 per channel well above int4 per block of 32.
        assert eight.weight_sqnr_db is not None and four.weight_sqnr_db is not None
        assert eight.weight_sqnr_db > four.weight_sqnr_db + 15.0 > 30.0, (eight, four)
    assert w8.output_sqnr_db > w4.output_sqnr_db > 10.0
