"""lowerkit.pass_infra.numerics: metrics, range diagnostics and the report's analysis (no lowering)."""

from __future__ import annotations

import math

import numpy as np

from lowerkit.pass_infra.numerics.metrics import tensor_error
from lowerkit.pass_infra.numerics.ranges import MIN_LEVELS, range_diagnostic
from lowerkit.pass_infra.numerics.report import DebugReport, LayerNumerics, Sensitivity


def test_tensor_error_reports_sqnr_max_error_quanta_and_cosine() -> None:
    reference = np.array([1.0, -2.0, 3.0, 4.0])
    approximation = reference + np.array([0.0, 0.1, 0.0, -0.2])
    error = tensor_error(reference, approximation, scale=0.1)
    assert math.isclose(error.sqnr_db, 10 * math.log10(30.0 / 0.05))
    assert math.isclose(error.max_abs_error, 0.2, rel_tol=1e-9)
    assert error.max_error_quanta == 2.0
    assert 0.99 < error.cosine < 1.0
    assert tensor_error(reference, reference).sqnr_db == math.inf
    assert tensor_error(reference, reference).max_error_quanta is None


def test_one_outlier_channel_is_flagged_even_where_the_whole_tensor_looks_fine() -> None:
    rng = np.random.default_rng(0)
    values = rng.uniform(0.0, 1.0, size=(1, 8, 4, 4))
    values[:, 3] *= 200.0  # channel 3 sets the int8 scale
    scale = float(values.max()) / 127
    diagnostic = range_diagnostic(values, scale)
    assert diagnostic is not None and diagnostic.flagged
    assert diagnostic.channel == 3 and diagnostic.starved_share == 7 / 8
    assert diagnostic.others_levels < MIN_LEVELS and "channel 3" in diagnostic.describe()
    quantized = np.round(values / scale) * scale
    assert tensor_error(values, quantized).sqnr_db > 30.0  # the whole tensor looks fine
    even = rng.uniform(0.0, 1.0, size=(1, 8, 4, 4))
    assert not range_diagnostic(even, float(even.max()) / 127).flagged  # type: ignore[union-attr]
    assert range_diagnostic(np.ones((1, 5)), 0.1) is None  # one value per channel: no verdict


def _layer(name: str, index: int, sqnr: float, quanta: float, inputs: tuple[str, ...] = ()) -> LayerNumerics:
    error = tensor_error(np.ones(4), np.ones(4))
    error = type(error)(sqnr, 0.1, 0.99, quanta)
    return LayerNumerics(name=name, op="aten.conv2d", index=index, error=error, inputs=inputs, keepable=True)


def test_report_names_where_the_error_starts_and_which_layers_add_it() -> None:
    layers = [
        _layer("a", 0, 45.0, 0.5),
        _layer("b", 1, 20.0, 3.0, ("a",)),  # adds 25 dB
        _layer("c", 2, 18.0, 4.0, ("b",)),  # inherits, adds 2 dB
    ]
    report = DebugReport("m", "t", "compared", layers, output_sqnr_db=18.0, threshold=1.0,
                         sensitivity=[Sensitivity("b", 30.0, 12.0)])
    assert report.first_over_threshold is layers[1]
    assert [x.name for x in report.worst_first()] == ["b", "a", "c"]
    assert report.added_db(layers[1]) == 25.0 and report.added_db(layers[2]) == 2.0
    assert any("--keep-float b" in line for line in report.advice())
    data = report.to_json()
    assert [row["name"] for row in data["layers"]] == ["b", "a", "c"]
    assert data["first_over_threshold"] == "b"


def test_a_threshold_on_a_comparison_skips_layers_without_it() -> None:
    plain = _layer("a", 0, 40.0, 30.0)  # far from float, but no device value to judge
    device = tensor_error(np.ones(4), np.ones(4) * 1.2, scale=0.1)
    staged = LayerNumerics("b", "aten.conv2d", 1, device, stages={"device vs quantized": device})
    report = DebugReport("m", "t", "c", [plain, staged], output_sqnr_db=20.0, threshold_stage="device vs quantized")
    assert report.first_over_threshold is staged


class _Bisection:
    """A stand-in for a backend's pass bisection (lowerkit.arm_passes.PassBisection)."""

    culprit = "BuggyPass"

    def line(self) -> str:
        return "pass bisection: BuggyPass"

    def advice(self) -> str | None:
        return "read BuggyPass"

    def to_json(self) -> dict[str, object]:
        return {"culprit": self.culprit}


def test_a_bisection_reaches_the_advice_and_the_json_and_is_null_without_one() -> None:
    layers = [_layer("a", 0, 45.0, 0.5)]
    plain = DebugReport("m", "t", "c", layers, output_sqnr_db=45.0)
    assert plain.to_json()["bisection"] is None
    found = DebugReport("m", "t", "c", layers, output_sqnr_db=45.0, bisection=_Bisection())
    assert found.to_json()["bisection"] == {"culprit": "BuggyPass"}
    assert "read BuggyPass" in found.advice()
    assert {k for k in found.to_json() if k != "bisection"} == set(plain.to_json()) - {"bisection"}
