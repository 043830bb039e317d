"""`lowerkit lower` on Ethos-U end to end: channel warnings, budgets, bundles, ETRecords, inspect, compare.

The model is the zoo's DS-CNN with 17 filters instead of 64 (``DsCnn(filters=17)``), through a
factory module: each of its convolutions has 17 output channels, one past a multiple of the
NPU's channel granularity.
"""

from __future__ import annotations

import json
import sys
import textwrap
from pathlib import Path

import pytest

from arm_targets.conftest import lowerkit_lowering, run_cli


@pytest.fixture(scope="module")
def factory(tmp_path_factory: pytest.TempPathFactory) -> str:
    folder = tmp_path_factory.mktemp("factory")
    (folder / "ds_cnn_variants.py").write_text(
        textwrap.dedent(
            """
            import torch
            from lowerkit.zoo.cnn import DsCnn

            def ds_cnn_17():
                torch.manual_seed(0)
                return DsCnn(filters=17).eval(), (torch.randn(1, 1, 49, 10),)
            """
        )
    )
    sys.path.insert(0, str(folder))
    return "ds_cnn_variants:ds_cnn_17"


@pytest.fixture(scope="module")
def outputs(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("out")


def test_lower_warns_writes_bundle_etrecord_report_and_inspect_reads_them(capsys, factory, outputs):
    pte, bpte, record, report = (outputs / n for n in ("m.pte", "m.bpte", "m.etrecord", "m.json"))
    code, out, err = run_cli(
        capsys, "lower", factory, "-t", "ethos-u55-128", "-o", str(pte), "--bundle", str(bpte),
        "--etrecord", str(record), "--report", str(report), "-q",
    )
    assert code == 0, err
    assert "NPU report (Vela" in out and "TOSA -> Vela:" in out
    assert "17 output channels: ethos-u55-128 computes them in groups of 8" in err, err
    summary = json.loads(report.read_text())
    assert any("16 channels would cut" in w for w in summary["warnings"])
    npu = summary["npu"]
    assert npu["totals"]["npu_cycles"] == npu["partitions"][0]["cycles"]["npu"] > 0
    assert npu["ops"]["npu_layers"] == len(npu["partitions"][0]["layers"])
    # DS-CNN's one-channel input is the same bytes in NCHW and NHWC: no layout transpose anywhere.
    kinds = ("delegate_boundary", "delegate_internal", "cpu_boundary", "cpu_internal")
    assert npu["ops"]["layout_transposes"] == {kind: [] for kind in kinds}
    assert "layout transposes: in the delegate 0 at its inputs/outputs, 0 inside" in out

    code, out, err = run_cli(capsys, "inspect", str(bpte), "--json")
    assert code == 0, err
    bundle = json.loads(out)
    assert bundle["kind"] == "bpte" and bundle["program_bytes"] == pte.stat().st_size
    assert len(bundle["suites"][0]["test_cases"]) == 9  # the example input and 8 calibration batches
    vela = bundle["methods"][0]["delegates"][0]["vela"]
    assert vela["scratch_bytes"] == npu["totals"]["scratch_bytes"]
    assert vela["accelerator-config"] == "ethos-u55-128"

    code, out, err = run_cli(capsys, "inspect", str(record))
    assert code == 0 and "ETRecord" in out and "debug_handle_map" in out, err
    code, out, err = run_cli(capsys, "inspect", str(report))
    assert code == 0 and "cycles: NPU" in out and "util%" in out, err


def test_compare_shows_what_changed(capsys, outputs):
    report = outputs / "m.json"
    other = outputs / "ds_cnn.pte"
    other.write_bytes(lowerkit_lowering("ethos-u55-64").pte)
    code, out, err = run_cli(capsys, "compare", str(report), str(other), "--json")
    assert code == 0, err
    result = json.loads(out)
    rows = {row["what"]: row for row in result["rows"]}
    assert rows["pte bytes"]["b"] == other.stat().st_size and not result["same_program"]
    assert rows["NPU cycles"]["b"] is None  # a bare .pte carries no Vela estimates
    assert rows["Vela weight bytes"]["change"] != "same"
    code, out, err = run_cli(capsys, "compare", str(report), str(outputs / "m.pte"))
    assert code == 0 and "same program bytes" in out, err


def test_sram_budget_below_the_need_is_one_line_and_writes_nothing(capsys, factory, tmp_path):
    out = tmp_path / "m.pte"
    code, _, err = run_cli(
        capsys, "lower", factory, "-t", "ethos-u55-128", "-o", str(out), "--bundle", str(tmp_path / "m.bpte"),
        "--sram-budget", "4KiB", "-q",
    )
    lines = [line for line in err.splitlines() if line.strip() and not line.startswith("warning:")]
    assert code == 1 and len(lines) == 1, err
    assert lines[0].startswith("lowerkit: error: needs ") and "of SRAM, budget 4.0 KiB; largest tensor: " in lines[0]
    assert "raise --sram-budget" in lines[0]
    assert list(tmp_path.iterdir()) == []
