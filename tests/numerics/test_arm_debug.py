"""debug_arm on a model built to fail in a known place, with the real TOSA reference model."""

from __future__ import annotations

import math

import pytest

from lowerkit.arm_passes.numerics.debug import TOSA_VS_QUANTIZED, debug_arm
from lowerkit.pass_infra.numerics.report import DebugReport
from numerics.models import CULPRIT, calibration, outlier


@pytest.fixture(scope="module")
def report() -> DebugReport:
    model, inputs = outlier()
    return debug_arm(model, inputs, "TOSA-1.0+INT", calibration=calibration(), scan=3, model_name="outlier")


def test_culprit_is_named_first(report: DebugReport) -> None:
    assert report.culprits()[0] == CULPRIT
    assert [x.name for x in report.flagged] == [CULPRIT]
    assert report.advice()[0].startswith(f"{CULPRIT} (aten.conv2d): channel 0 sits at")


def test_culprit_looks_fine_alone_and_the_damage_shows_one_op_later(report: DebugReport) -> None:
    layers = {x.name: x for x in report.layers}
    assert layers[CULPRIT].error.sqnr_db > 30.0
    assert layers["block1.2"].error.sqnr_db < 10.0
    assert layers["block1.2"].inputs == (CULPRIT,)
    assert report.worst_first()[0].name == "block1.2"


def test_tosa_intermediates_are_compared_for_every_layer(report: DebugReport) -> None:
    for layer in report.layers:
        tosa = layer.stages[TOSA_VS_QUANTIZED]
        # Integer rescaling rounds differently from float fake-quant: a quantum or two at most here.
        assert tosa.max_error_quanta is not None and tosa.max_error_quanta <= 2.0, layer
        assert tosa.cosine > 0.99, layer
    assert report.summary["tosa_vs_quantized_output"]["max_error_quanta"] <= 2.0
    # Reading the intermediates (extra graph outputs) leaves the computed outputs bit-identical.
    assert report.summary["tosa_intermediates_same_outputs"] is True


def test_keeping_the_culprit_in_float_recovers_the_output(report: DebugReport) -> None:
    best = report.sensitivity[0]
    assert best.name == CULPRIT
    assert report.output_sqnr_db < 10.0
    assert best.gain_db > 10.0 and math.isfinite(best.output_sqnr_db), report.sensitivity
    assert all(s.gain_db < 1.0 for s in report.sensitivity[1:]), report.sensitivity


def test_json_lists_layers_worst_first_with_the_fields(report: DebugReport) -> None:
    data = report.to_json()
    assert [row["name"] for row in data["layers"]] == [x.name for x in report.worst_first()]
    assert {"name", "op", "sqnr_db", "max_error_quanta", "cosine"} <= set(data["layers"][0])
    assert data["culprits"][0] == CULPRIT


def test_tosa_fp_intermediates_match_eager_op_by_op() -> None:
    model, inputs = outlier()
    report = debug_arm(model, inputs, "TOSA-1.0+FP", model_name="outlier")
    compared = {x.name for x in report.layers}
    assert {"block1.0", "block1.1", "block1.2", "block2.0", "block3.0", "fc"} <= compared
    # The pipeline moves block3's ReLU past the flatten's reshape: that tensor is not flatten's value.
    assert "flatten" not in compared and "flatten" in report.notes[0]
    assert report.first_over_threshold is None
    assert all(x.error.sqnr_db > 100.0 and x.error.cosine > 0.9999 for x in report.layers), report.layers


def test_no_bisection_when_the_tosa_graph_agrees(report: DebugReport) -> None:
    # The TOSA graph is within the threshold of the fake-quant program: the pipeline is not bisected.
    assert report.bisection is None
    assert report.to_json()["bisection"] is None


def test_a_pass_bug_makes_the_report_name_the_pass() -> None:
    from arm_passes_tests.pass_bugs import ScaleOneOutputQParamPass
    from lowerkit.arm_passes.runner import passes_inserted_after
    from lowerkit.cli.debug_command import table

    model, inputs = outlier()
    with passes_inserted_after(ScaleOneOutputQParamPass.AFTER, [ScaleOneOutputQParamPass()]):
        report = debug_arm(model, inputs, "TOSA-1.0+INT", calibration=calibration(), scan=0, model_name="outlier")
    # Not asked for: the TOSA graph departing from the fake-quant program is what started it.
    assert report.summary["tosa_vs_quantized_output"]["max_error_quanta"] > report.threshold
    bisection = report.bisection
    assert bisection is not None and bisection.culprit == "ScaleOneOutputQParamPass", bisection
    data = report.to_json()["bisection"]
    assert data["culprit"] == "ScaleOneOutputQParamPass" and data["trusted"] is True
    assert data["max_quanta_after"] > data["threshold_quanta"] >= data["max_quanta_before"]
    assert any("ScaleOneOutputQParamPass" in line and "read that pass" in line for line in report.advice())
    assert bisection.line() in table(report, 5)
