"""`lowerkit debug` and `lowerkit lower --keep-float` end to end (Core ML int8: the quicker backend)."""

from __future__ import annotations

import contextlib
import io
import json
from pathlib import Path
from typing import Any

import pytest
import torch

from arm_targets.conftest import run_cli
from lowerkit.cli import run
from lowerkit.cli.model_source import load
from lowerkit.cli.options import LowerOptions
from lowerkit.cli.progress import Steps
from lowerkit.cli.targets import get
from numerics.models import CULPRIT, calibration

MODEL = "numerics.models:outlier"


@pytest.fixture(scope="module")
def calibration_file(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("calibration") / "batches.pt"
    torch.save(calibration(), path)
    return path


@pytest.fixture(scope="module")
def debugged(calibration_file: Path, tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict[str, Any]]:
    """One `lowerkit debug --json -o report.html` run, shared by the tests (capsys is per test)."""
    html = tmp_path_factory.mktemp("report") / "report.html"
    out = io.StringIO()
    with contextlib.redirect_stdout(out), pytest.raises(SystemExit) as exit_info:
        run(["debug", MODEL, "-t", "coreml-int8", "--calibration", str(calibration_file), "--scan", "2", "-q", "--json", "-o", str(html)])
    assert exit_info.value.code == 0
    return html, json.loads(out.getvalue())


def test_json_names_the_culprit_and_lists_layers_worst_first(debugged: tuple[Path, dict[str, Any]]) -> None:
    _, data = debugged
    assert data["culprits"][0] == CULPRIT
    assert data["sensitivity"][0]["name"] == CULPRIT and data["sensitivity"][0]["gain_db"] > 10.0
    rows = data["layers"]
    assert {"name", "op", "sqnr_db", "max_error_quanta", "cosine"} <= set(rows[0])
    added = [row["added_db"] for row in rows]
    assert added == sorted(added, reverse=True)
    assert any(f"--keep-float {CULPRIT}" in command for command in data["summary"]["commands"])


def test_html_report_is_self_contained_with_the_chart_and_every_layer(debugged: tuple[Path, dict[str, Any]]) -> None:
    html, data = debugged
    page = html.read_text()
    assert "<svg" in page and "<polyline" in page
    assert "http" not in page and "<script" not in page and "<link" not in page
    for row in data["layers"]:
        assert f"<td>{row['name']}</td>" in page


def test_unknown_keep_float_name_is_one_line_with_the_closest_names(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = run_cli(capsys, "lower", MODEL, "-t", "coreml-int8", "-o", "/tmp/never.pte", "--keep-float", "blok1")
    assert code == 2 and not out
    assert err.count("\n") == 1 and "no module 'blok1'" in err and "'block1'" in err, err
    code, _, err = run_cli(capsys, "lower", MODEL, "-t", "coreml", "-o", "/tmp/never.pte", "--keep-float", "block1")
    assert code == 2 and "--keep-float applies to quantizing targets" in err


def test_a_model_with_no_quantizable_layer_says_so(capsys: pytest.CaptureFixture[str]) -> None:
    code, _, err = run_cli(capsys, "debug", "numerics.models:nothing_to_quantize", "-t", "coreml-int8", "-q", "--scan", "0")
    # coremltools' progress bar may precede it here (the in-process run cannot silence it as the
    # console entry point does); the error itself is one line.
    errors = [line for line in err.splitlines() if line.startswith("lowerkit:")]
    assert code == 2 and len(errors) == 1 and "has no layer the int8 quantizer quantizes" in errors[0], err


def test_keep_float_changes_nothing_unless_a_layer_is_named(calibration_file: Path) -> None:
    from lowerkit.cli import lowering

    source = load(MODEL)
    target = get("coreml-int8")

    def pte(keep: tuple[str, ...]) -> bytes:
        options = LowerOptions(target, calibration_path=calibration_file, keep_float=keep)
        return lowering.lower(source, options, steps=Steps(show=False)).pte

    plain = lowering.lower(source, LowerOptions(target, calibration_path=calibration_file), steps=Steps(show=False)).pte
    assert pte(()) == plain
    assert pte((CULPRIT,)) != plain


def test_scan_zero_tries_no_layer(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run_cli(capsys, "debug", MODEL, "-t", "coreml-int8", "-q", "--scan", "0", "--json")
    assert code == 0 and json.loads(out)["sensitivity"] == []


def test_bisect_flag_forces_the_pass_bisection_on_arm(calibration_file: Path, tmp_path: Path) -> None:
    html = tmp_path / "report.html"
    out = io.StringIO()
    with contextlib.redirect_stdout(out), pytest.raises(SystemExit) as exit_info:
        run(["debug", MODEL, "-t", "tosa-int", "--calibration", str(calibration_file), "--scan", "0", "-q",
             "--bisect", "--json", "-o", str(html)])
    assert exit_info.value.code == 0
    data = json.loads(out.getvalue())
    # The clean pipeline: every pass's graph computes the fake-quant program's outputs.
    bisection = data["bisection"]
    assert bisection["culprit"] is None and bisection["trusted"] is True, bisection
    assert bisection["reached"] == bisection["passes"] + 1
    assert "--bisect" in data["summary"]["commands"][0]
    page = html.read_text()
    assert "<h2>Pass bisection</h2>" in page and "no pass changes the outputs" in page


def test_bisect_flag_is_refused_off_arm(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = run_cli(capsys, "debug", MODEL, "-t", "coreml-int8", "-q", "--bisect")
    assert code == 2 and not out and "--bisect bisects the Arm pass pipeline" in err
