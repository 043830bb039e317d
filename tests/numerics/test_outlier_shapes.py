"""`lowerkit debug` on the three outlier shapes of real models (offset, wide, heavy-tailed channels):
the layer that sets the scale is named first, the error a slice shows is charged to it, and the
advised keep-float set brings the output to the target SQNR (Arm TOSA INT and Core ML int8)."""

from __future__ import annotations

import contextlib
import io
import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import torch

from lowerkit.arm_passes.numerics.debug import debug_arm, keep_float_gain
from lowerkit.cli import run
from lowerkit.coreml_preprocess.numerics import debug_coreml
from lowerkit.pass_infra.numerics.report import DebugReport
from numerics import models

Factory = Callable[[], tuple[torch.nn.Module, tuple[torch.Tensor, ...]]]
#: shape -> (factory, the layer that sets the scale, the slice after it, range kind, calibration).
SHAPES: dict[str, tuple[Factory, str, str, str, Callable[[], list[tuple[torch.Tensor, ...]]]]] = {
    "offset": (models.offset, models.STEM, models.PICK, "offset", models.calibration),
    "wide": (models.wide, models.STEM, models.PICK, "wide", models.calibration),
    "heavy_tailed": (models.heavy_tailed, models.PROJ, models.DROP, "heavy-tailed", models.token_calibration),
}
TARGET_DB = 30.0
#: Few trials keep the tests quick: three layers alone, then up to four more.
SCAN, SEARCH = 3, 4


def _debug_json(args: list[str]) -> dict[str, Any]:
    out = io.StringIO()
    with contextlib.redirect_stdout(out), pytest.raises(SystemExit) as exit_info:
        run(["debug", *args, "-q", "--json", "--scan", str(SCAN), "--search", str(SEARCH)])
    assert exit_info.value.code == 0
    return json.loads(out.getvalue())


@pytest.fixture(scope="module", params=list(SHAPES))
def arm_json(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> tuple[str, dict[str, Any], Path]:
    """`lowerkit debug numerics.models:SHAPE -t tosa-int --json -o report.html` for one shape."""
    shape = request.param
    folder = tmp_path_factory.mktemp(shape)
    torch.save(SHAPES[shape][4](), folder / "calibration.pt")
    html = folder / "report.html"
    data = _debug_json([f"numerics.models:{shape}", "-t", "tosa-int", "--calibration", str(folder / "calibration.pt"),
                        "--target-sqnr", str(TARGET_DB), "-o", str(html)])
    return shape, data, html


def test_cli_names_the_layer_that_sets_the_scale_first_with_its_shape(arm_json: tuple[str, dict[str, Any], Path]) -> None:
    shape, data, _ = arm_json
    _, culprit, dropper, kind, _ = SHAPES[shape]
    assert data["culprits"][0] == culprit and data["flagged_ranges"] == [culprit], data["culprits"]
    row = next(r for r in data["layers"] if r["name"] == culprit)
    assert row["range"]["kind"] == kind and row["range"]["flagged"], row["range"]
    assert row["range"]["others_levels"] < 16 and "sets the scale" in data["advice"][0]
    # The slice shows the error; it is charged to the layer whose quantization made it.
    assert data["error_moved_at"] == {"layer": dropper, "producer": culprit}
    assert next(r for r in data["layers"] if r["name"] == dropper)["blame"] == culprit


def test_cli_advises_the_pair_on_arm_where_the_culprit_alone_does_not_help(arm_json: tuple[str, dict[str, Any], Path]) -> None:
    shape, data, html = arm_json
    _, culprit, dropper, _, _ = SHAPES[shape]
    advice = data["keep_float_advice"]
    # On Arm the slice shares the culprit's quantization parameters: keeping the culprit alone
    # in float leaves its output quantized with the outlier in range.
    alone = next(s for s in data["sensitivity"] if s["name"] == culprit)
    assert alone["output_sqnr_db"] < TARGET_DB and alone["gain_db"] < 1.0, data["sensitivity"]
    assert sorted(advice["names"]) == sorted([culprit, dropper]) and advice["reached"], advice
    assert advice["output_sqnr_db"] >= TARGET_DB > data["output_sqnr_db"] == advice["baseline_db"]
    assert len(advice["trials"]) <= SCAN + 1 + SEARCH
    lower = data["summary"]["commands"][-1]
    assert lower.startswith("lowerkit lower") and all(f"--keep-float {n}" in lower for n in advice["names"])
    page = html.read_text()
    assert "Keep-float search" in page and "sets the scale" in page and "http" not in page


@pytest.fixture(scope="module", params=list(SHAPES))
def coreml_report(request: pytest.FixtureRequest) -> tuple[str, DebugReport]:
    shape = request.param
    factory, _, _, _, batches = SHAPES[shape]
    model, inputs = factory()
    return shape, debug_coreml(model, inputs, calibration=batches(), scan=SCAN, search=SEARCH, model_name=shape)


def test_coreml_names_the_culprit_and_the_advice_reaches_the_target(coreml_report: tuple[str, DebugReport]) -> None:
    shape, report = coreml_report
    _, culprit, dropper, kind, _ = SHAPES[shape]
    assert report.culprits()[0] == culprit
    assert [(x.name, x.range.kind if x.range else None) for x in report.flagged] == [(culprit, kind)]
    moved = report.moved_error()
    assert moved is not None and moved.name == dropper and report.blamed(moved).name == culprit
    advice = report.keep_float_advice
    assert advice is not None and advice.reached and culprit in advice.names, advice
    assert advice.output_sqnr_db >= TARGET_DB > report.output_sqnr_db


def test_the_advised_set_lowered_again_reaches_the_target() -> None:
    model, inputs = models.offset()
    report = debug_arm(model, inputs, calibration=models.calibration(), scan=SCAN, search=SEARCH, model_name="offset")
    advice = report.keep_float_advice
    assert advice is not None and advice.reached
    before, after = keep_float_gain(models.offset()[0], inputs, "TOSA-1.0+INT", advice.names, calibration=models.calibration())
    assert after >= TARGET_DB > before
