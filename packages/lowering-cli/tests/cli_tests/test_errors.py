"""Every mistake a user can make gets one line, the right exit code and no output file."""

from __future__ import annotations

import os
import textwrap
from pathlib import Path

import pytest
import torch

from lowerkit import zoo


def assert_one_line_error(outcome, code: int, *fragments: str) -> None:
    assert outcome.code == code, outcome
    lines = [line for line in outcome.err.splitlines() if line.strip()]
    assert len(lines) == 1, outcome.err
    assert lines[0].startswith("lowerkit: error: "), lines[0]
    assert "Traceback" not in outcome.err
    for fragment in fragments:
        assert fragment in lines[0], lines[0]


@pytest.fixture
def out(tmp_path: Path) -> Path:
    return tmp_path / "model.pte"


def assert_nothing_written(folder: Path) -> None:
    assert [p.name for p in folder.iterdir()] == [], list(folder.iterdir())


def test_unknown_zoo_model(lowerkit, out):
    outcome = lowerkit("lower", "zoo:resnet9", "-t", "coreml", "-o", str(out))
    assert_one_line_error(outcome, 2, "unknown zoo model 'resnet9'", "Did you mean 'resnet8'", "ds_cnn")
    assert_nothing_written(out.parent)


def test_unknown_target_lists_the_valid_ones(lowerkit, out):
    outcome = lowerkit("lower", "zoo:resnet8", "-t", "coreml-int4", "-o", str(out))
    assert_one_line_error(outcome, 2, "unknown target 'coreml-int4'", "tosa-int", "ethos-u55-128")
    assert_nothing_written(out.parent)


def test_missing_model_file(lowerkit, out, tmp_path):
    outcome = lowerkit("lower", str(tmp_path / "absent.pt2"), "-t", "coreml", "-o", str(out))
    assert_one_line_error(outcome, 2, "absent.pt2", "does not exist")


def test_corrupt_pt2(lowerkit, tmp_path):
    bad = tmp_path / "bad.pt2"
    bad.write_bytes(b"PK\x03\x04 this is not a torch.export archive")
    out = tmp_path / "out" / "model.pte"
    out.parent.mkdir()
    outcome = lowerkit("lower", str(bad), "-t", "coreml", "-o", str(out))
    assert_one_line_error(outcome, 2, "bad.pt2", "not a readable torch.export archive")
    assert_nothing_written(out.parent)


def test_factory_module_that_does_not_import(lowerkit, out):
    outcome = lowerkit("lower", "no_such_package.models:build", "-t", "coreml", "-o", str(out))
    assert_one_line_error(outcome, 2, "cannot import 'no_such_package.models'")


@pytest.fixture
def factories(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> str:
    (tmp_path / "user_factories.py").write_text(
        textwrap.dedent(
            """
            import torch

            def wrong_type():
                return torch.nn.Linear(2, 2)

            def raises():
                raise RuntimeError("weights missing")

            def good():
                return torch.nn.Linear(4, 2), (torch.randn(1, 4),)

            class AdditiveMask(torch.nn.Module):
                def __init__(self):
                    super().__init__()
                    self.proj = torch.nn.Linear(4, 4)
                    self.register_buffer("mask", torch.full((4, 4), float("-inf")).triu(1))

                def forward(self, x):
                    return torch.softmax(self.proj(x) + self.mask, dim=-1)

            def additive_mask():
                return AdditiveMask(), (torch.randn(4, 4),)

            not_callable = 3
            """
        )
    )
    monkeypatch.syspath_prepend(str(tmp_path))
    return "user_factories"


def test_factory_that_returns_the_wrong_thing(lowerkit, factories, out):
    outcome = lowerkit("lower", f"{factories}:wrong_type", "-t", "coreml", "-o", str(out))
    assert_one_line_error(outcome, 2, "must return (torch.nn.Module, tuple of example input tensors)")


def test_factory_that_raises(lowerkit, factories, out):
    outcome = lowerkit("lower", f"{factories}:raises", "-t", "coreml", "-o", str(out))
    assert_one_line_error(outcome, 2, "RuntimeError: weights missing")


def test_int8_calibration_that_sees_infinity(lowerkit, factories, out):
    outcome = lowerkit("lower", f"{factories}:additive_mask", "-t", "coreml-int8", "-o", str(out), "-q")
    assert_one_line_error(outcome, 1, "calibration saw a non-finite value in `mask`", "masked_fill")
    assert sorted(p.name for p in out.parent.iterdir()) == ["user_factories.py"]


def test_factory_name_that_is_not_callable(lowerkit, factories, out):
    outcome = lowerkit("lower", f"{factories}:not_callable", "-t", "coreml", "-o", str(out))
    assert_one_line_error(outcome, 2, "has no callable 'not_callable'")


def test_model_argument_of_unknown_kind(lowerkit, out):
    outcome = lowerkit("lower", "resnet8", "-t", "coreml", "-o", str(out))
    assert_one_line_error(outcome, 2, "cannot tell what model 'resnet8' is", "zoo:NAME")


def test_output_folder_that_does_not_exist(lowerkit, tmp_path):
    outcome = lowerkit("lower", "zoo:conv_linear", "-t", "coreml", "-o", str(tmp_path / "nope" / "m.pte"))
    assert_one_line_error(outcome, 2, "does not exist")


def test_output_path_that_is_a_folder(lowerkit, tmp_path):
    outcome = lowerkit("lower", "zoo:conv_linear", "-t", "coreml", "-o", str(tmp_path))
    assert_one_line_error(outcome, 2, "is a directory")


def test_unwritable_output_location(lowerkit):
    outcome = lowerkit("lower", "zoo:conv_linear", "-t", "coreml", "-o", "/proc/lowerkit-test.pte")
    assert_one_line_error(outcome, 2, "cannot write '/proc/lowerkit-test.pte'")


def test_calibration_shapes_that_do_not_match(lowerkit, tmp_path, out):
    calibration = tmp_path / "calibration.pt"
    torch.save([(torch.randn(1, 3, 8, 8),)], calibration)
    outcome = lowerkit(
        "lower", "zoo:conv_linear", "-t", "coreml-int8", "--calibration", str(calibration), "-o", str(out)
    )
    assert_one_line_error(outcome, 2, "(1, 3, 8, 8)", "expects (1, 3, 16, 16)")
    assert not out.exists()


def test_calibration_with_the_wrong_number_of_inputs(lowerkit, tmp_path, out):
    calibration = tmp_path / "calibration.pt"
    torch.save((torch.randn(1, 3, 16, 16), torch.randn(1)), calibration)
    outcome = lowerkit(
        "lower", "zoo:conv_linear", "-t", "coreml-int8", "--calibration", str(calibration), "-o", str(out)
    )
    assert_one_line_error(outcome, 2, "has 2 inputs, the model takes 1")


def test_calibration_path_that_does_not_exist(lowerkit, tmp_path, out):
    outcome = lowerkit(
        "lower", "zoo:conv_linear", "-t", "coreml-int8", "--calibration", str(tmp_path / "none"), "-o", str(out)
    )
    assert_one_line_error(outcome, 2, "does not exist")


def test_calibration_folder_without_tensors(lowerkit, tmp_path, out):
    folder = tmp_path / "empty"
    folder.mkdir()
    outcome = lowerkit(
        "lower", "zoo:conv_linear", "-t", "coreml-int8", "--calibration", str(folder), "-o", str(out)
    )
    assert_one_line_error(outcome, 2, "holds no .pt files")


def test_calibration_file_that_is_not_a_tensor_file(lowerkit, tmp_path, out):
    calibration = tmp_path / "calibration.pt"
    calibration.write_text("not a tensor")
    outcome = lowerkit(
        "lower", "zoo:conv_linear", "-t", "coreml-int8", "--calibration", str(calibration), "-o", str(out)
    )
    assert_one_line_error(outcome, 2, "cannot read calibration file")


def test_coreml_passes_on_an_arm_target(lowerkit, out):
    outcome = lowerkit("lower", "zoo:conv_linear", "-t", "tosa-int", "--coreml-passes", "common::fuse_conv_bias", "-o", str(out))
    assert_one_line_error(outcome, 2, "--coreml-passes applies to Core ML targets")


def test_coreml_pass_file_that_does_not_exist(lowerkit, tmp_path, out):
    outcome = lowerkit("lower", "zoo:conv_linear", "-t", "coreml", "--coreml-passes", f"@{tmp_path / 'p.txt'}", "-o", str(out))
    assert_one_line_error(outcome, 2, "pass file", "does not exist")


def test_inspect_missing_file(lowerkit, tmp_path):
    assert_one_line_error(lowerkit("inspect", str(tmp_path / "x.pte")), 2, "does not exist")


def test_inspect_a_file_that_is_not_a_pte(lowerkit, tmp_path):
    path = tmp_path / "x.pte"
    path.write_bytes(b"\x00" * 64)
    assert_one_line_error(lowerkit("inspect", str(path)), 2, "not an ExecuTorch .pte file")


def test_inspect_a_truncated_pte(lowerkit, tmp_path):
    good = tmp_path / "good.pte"
    assert lowerkit("lower", "zoo:conv_linear", "-t", "coreml", "-o", str(good), "-q").code == 0
    truncated = tmp_path / "truncated.pte"
    truncated.write_bytes(good.read_bytes()[:200])
    assert_one_line_error(lowerkit("inspect", str(truncated)), 2, "damaged .pte file")


def test_interrupt_during_the_write_leaves_no_file(lowerkit, tmp_path, monkeypatch):
    out = tmp_path / "model.pte"

    def interrupted(*_args, **_kwargs):
        raise KeyboardInterrupt

    monkeypatch.setattr(os, "fsync", interrupted)
    outcome = lowerkit("lower", "zoo:conv_linear", "-t", "coreml", "-o", str(out), "-q")
    assert outcome.code == 130
    assert "interrupted; no output was written" in outcome.err
    assert_nothing_written(tmp_path)


def test_every_zoo_name_is_accepted(lowerkit):
    outcome = lowerkit("zoo")
    assert outcome.code == 0
    assert [line.split()[0] for line in outcome.out.splitlines()] == [f"zoo:{n}" for n in zoo.names()]
