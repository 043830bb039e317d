"""End to end: each target writes a .pte that `lowerkit inspect` reads, byte-identical on reruns."""

from __future__ import annotations

import json

import pytest
import torch

from lowerkit.cli import targets
from lowerkit.cli.backends.arm.targets import ETHOS_U_CONFIGS

#: The smallest zoo model each target applies to (the full sweep is tools/e2e/sweep.py).
SMALLEST = {"coreml": "conv_linear", "arm": "ds_cnn"}


#: Ethos-U configurations beyond the first two are lowered, stock vs lowerkit, in tests/arm_targets.
EXTRA_ETHOS_U = {f"ethos-u{npu}-{macs}" for npu, macs in ETHOS_U_CONFIGS} - {"ethos-u55-128", "ethos-u85-256"}


@pytest.mark.parametrize("target", [t for t in targets.TARGETS if t not in EXTRA_ETHOS_U])
def test_target_writes_a_pte_that_inspect_reads(lowerkit, tmp_path, target):
    backend = targets.TARGETS[target].backend
    # coreml-palettize4 on conv_linear: a linear layer too narrow (8 columns) for 16-column tables.
    model = "tiny_lm" if target == "coreml-w4" else SMALLEST[backend]
    out = tmp_path / f"{target}.pte"
    report = tmp_path / "report.json"
    outcome = lowerkit("lower", f"zoo:{model}", "-t", target, "-o", str(out), "--report", str(report), "-q")
    assert outcome.code == 0, outcome.err
    summary = json.loads(report.read_text())
    assert summary["pte_bytes"] == out.stat().st_size
    inspected = lowerkit("inspect", str(out), "--json")
    assert inspected.code == 0, inspected.err
    methods = json.loads(inspected.out)["methods"]
    if backend == "coreml":
        backend_id = "CoreMLBackend"
    elif target.startswith("ethos-u"):
        backend_id = "EthosUBackend"
    elif target.startswith("vgf"):
        backend_id = "VgfBackend"  # its payload is the model converter's VGF
    else:
        backend_id = "TOSABackend"
    assert [d["backend_id"] for d in methods[0]["delegates"]] == [backend_id]
    if backend == "arm":
        assert summary["passes"], "the Arm pipeline report is missing"
        assert all({"name", "ran", "wall_ms"} <= set(row) for row in summary["passes"])


@pytest.mark.parametrize("target", ["coreml-int8", "coreml-palettize4"])
def test_quantized_transformer_verifies_against_float(lowerkit, tmp_path, target):
    """tiny_lm calibrates to finite int8 ranges, and the palettized module runs in torch for --verify."""
    out = tmp_path / "lm.pte"
    outcome = lowerkit("lower", "zoo:tiny_lm", "-t", target, "-o", str(out), "--verify", "--json", "-q")
    assert outcome.code == 0, outcome.err
    verification = json.loads(outcome.out)["verification"]
    assert 15.0 < verification["output_sqnr_db"] < float("inf"), verification
    assert verification["decoded_weights"] > 0


def test_weight_sqnr_compares_with_batch_norm_folded_convolutions(lowerkit, tmp_path):
    """Core ML folds BatchNorm into the convolution before compressing: the reference must too."""
    out = tmp_path / "resnet8.pte"
    outcome = lowerkit("lower", "zoo:resnet8", "-t", "coreml-w8", "-o", str(out), "--verify", "--json", "-q")
    assert outcome.code == 0, outcome.err
    verification = json.loads(outcome.out)["verification"]
    assert verification["weight_sqnr_db"] > 30.0, verification


def test_weight_target_that_compresses_nothing_says_so(lowerkit, tmp_path):
    outcome = lowerkit("lower", "zoo:conv_linear", "-t", "coreml-w8", "-o", str(tmp_path / "m.pte"), "--json", "-q")
    assert outcome.code == 0, outcome.err
    assert any("compressed none" in w for w in json.loads(outcome.out)["warnings"]), outcome.out


def test_same_command_twice_gives_the_same_bytes(lowerkit, tmp_path):
    for target in ("coreml", "tosa-int"):
        model = SMALLEST[targets.TARGETS[target].backend]
        first, second = tmp_path / "first.pte", tmp_path / "second.pte"
        for out in (first, second):
            assert lowerkit("lower", f"zoo:{model}", "-t", target, "-o", str(out), "-q", "--no-cache").code == 0
        assert first.read_bytes() == second.read_bytes(), target


def test_mlpackage_and_weight_formats(lowerkit, tmp_path):
    out, package = tmp_path / "lm.pte", tmp_path / "lm.mlpackage"
    outcome = lowerkit("lower", "zoo:tiny_lm", "-t", "coreml-w4", "-o", str(out), "--mlpackage", str(package), "--verify", "-q")
    assert outcome.code == 0, outcome.err
    assert (package / "Manifest.json").is_file()
    assert (package / "Data" / "com.apple.CoreML" / "model.mlmodel").is_file()
    assert "Core ML itself cannot run on Linux" in outcome.out
    inspected = json.loads(lowerkit("inspect", str(out), "--json").out)
    weights = inspected["methods"][0]["delegates"][0]["weights"]
    assert weights["constexpr_ops"], weights
    assert weights["decoded_weights"] > 0


def test_tosa_dir_holds_the_flatbuffer(lowerkit, tmp_path):
    out, folder = tmp_path / "m.pte", tmp_path / "tosa"
    assert lowerkit("lower", "zoo:ds_cnn", "-t", "tosa-fp", "-o", str(out), "--tosa-dir", str(folder), "-q").code == 0
    flatbuffers = list(folder.iterdir())
    assert len(flatbuffers) == 1
    assert flatbuffers[0].read_bytes()[4:8] == b"TOSA"


def test_exported_program_file_as_model(lowerkit, tmp_path):
    module = torch.nn.Sequential(torch.nn.Linear(8, 4), torch.nn.ReLU())
    path = tmp_path / "mlp.pt2"
    torch.export.save(torch.export.export(module, (torch.randn(2, 8),)), str(path))
    out = tmp_path / "mlp.pte"
    outcome = lowerkit("lower", str(path), "-t", "coreml-fp32", "-o", str(out), "--json", "-q")
    assert outcome.code == 0, outcome.err
    assert json.loads(outcome.out)["model"] == "mlp"


def test_op_no_backend_takes_stays_on_cpu_and_is_reported(lowerkit, tmp_path, monkeypatch):
    (tmp_path / "sort_model.py").write_text(
        "import torch\n"
        "class M(torch.nn.Module):\n"
        "    def forward(self, x):\n"
        "        return torch.sort(torch.relu(x), dim=1)[0] * 2\n"
        "def build():\n"
        "    return M(), (torch.randn(1, 8),)\n"
    )
    monkeypatch.syspath_prepend(str(tmp_path))
    out, report = tmp_path / "m.pte", tmp_path / "r.json"
    outcome = lowerkit("lower", "sort_model:build", "-t", "tosa-fp", "-o", str(out), "--report", str(report), "-q")
    assert outcome.code == 0, outcome.err
    cpu_ops = json.loads(report.read_text())["cpu_ops"]
    assert cpu_ops == ["aten::sort"], cpu_ops
    assert "partial delegation" in outcome.err and "aten::sort" in outcome.err
    delegates = json.loads(lowerkit("inspect", str(out), "--json").out)["methods"][0]["delegates"]
    assert delegates and {d["backend_id"] for d in delegates} == {"TOSABackend"}


def test_json_output_stays_json_when_arm_verification_runs_the_reference_model(tmp_path):
    """The TOSA reference model prints to file descriptor 1; --json must still be clean."""
    import os
    import subprocess
    import sys

    done = subprocess.run(
        [sys.executable, "-c", "from lowerkit.cli import run; run()", "lower", "zoo:ds_cnn", "-t", "tosa-fp", "-o", str(tmp_path / "m.pte"), "--verify", "--json", "-q"],
        capture_output=True,
        text=True,
        check=False,
        env={**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)},
    )
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["verification"]["max_abs_error"] <= 1e-5
    assert "Different TOSA spec" not in done.stderr, "the reference model's per-run notice should be dropped"
