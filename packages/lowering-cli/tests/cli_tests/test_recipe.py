"""`lowerkit lower --recipe recipe.toml`: a compression recipe file for the Core ML float targets."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from cli_tests.test_errors import assert_nothing_written, assert_one_line_error

#: conv_linear's weights are small: a threshold of 0 compresses them all.
RECIPE = """
weight_threshold = 0

[global]
method = "palettize"
nbits = 4

[[rules]]
name = "classifier int8"
op_type = "linear"
method = "linear"
dtype = "int8"
granularity = "per_channel"
"""


@pytest.fixture
def recipe(tmp_path: Path) -> Path:
    path = tmp_path / "recipes" / "recipe.toml"
    path.parent.mkdir()
    path.write_text(RECIPE)
    return path


def test_a_recipe_compresses_the_conv_and_the_linear(lowerkit, tmp_path, recipe):
    out = tmp_path / "out" / "m.pte"
    out.parent.mkdir()
    outcome = lowerkit("lower", "zoo:conv_linear", "-t", "coreml", "--recipe", str(recipe), "-o", str(out), "-q")
    assert outcome.code == 0, outcome.err
    inspected = lowerkit("inspect", str(out), "--json")
    assert inspected.code == 0, inspected.err
    weights = json.loads(inspected.out)["methods"][0]["delegates"][0]["weights"]
    # Per-tensor tables and int8 per channel need only iOS16: its affine dequantize op.
    assert weights["constexpr_ops"] == {"constexpr_affine_dequantize": 1, "constexpr_lut_to_dense": 1}
    again = tmp_path / "out" / "again.pte"
    assert lowerkit("lower", "zoo:conv_linear", "-t", "coreml", "--recipe", str(recipe), "-o", str(again), "-q").code == 0
    assert again.read_bytes() == out.read_bytes()


@pytest.mark.parametrize(
    ("target", "fragment"),
    [
        ("coreml-w8", "--recipe applies to coreml or coreml-fp32 (targets that compress nothing themselves), not 'coreml-w8'"),
        ("coreml-palettize4", "not 'coreml-palettize4'"),
        ("tosa-int", "--recipe applies to Core ML targets, not 'tosa-int'"),
    ],
)
def test_a_recipe_needs_a_float_core_ml_target(lowerkit, tmp_path, recipe, target, fragment):
    out = tmp_path / "out" / "m.pte"
    out.parent.mkdir()
    outcome = lowerkit("lower", "zoo:conv_linear", "-t", target, "--recipe", str(recipe), "-o", str(out))
    assert_one_line_error(outcome, 2, fragment)
    assert_nothing_written(out.parent)


@pytest.mark.parametrize(
    ("text", "fragments"),
    [
        ('[global]\nmethod = "palettize"\nnbit = 4', ("recipe.toml: global setting: unknown key 'nbit'", "Did you mean 'nbits'?")),
        ('[[rules]]\nname = "dw"\nop_type = "depthwise"\nmethod = "none"', ("rule 'dw': unknown op_type 'depthwise'", "Did you mean 'depthwise_conv'?")),
        ('[global]\nmethod = "palettize"\nnbits = 4\n[[rules]]\nname = "head"\nmatch = "head"\nmethod = "none"', ("rule 'head' selects no weight of the model",)),
    ],
)
def test_a_bad_recipe_is_one_line_naming_the_rule(lowerkit, tmp_path, text, fragments):
    path = tmp_path / "recipe.toml"
    path.write_text(text)
    out = tmp_path / "out" / "m.pte"
    out.parent.mkdir()
    outcome = lowerkit("lower", "zoo:conv_linear", "-t", "coreml", "--recipe", str(path), "-o", str(out), "-q")
    # A rule selecting nothing is known once converted: drop coremltools' progress bars, which the
    # real entry point disables (TQDM_DISABLE) but an in-process run that imported tqdm earlier shows.
    outcome.err = "\n".join(line for line in outcome.err.splitlines() if "ops/s]" not in line)
    assert_one_line_error(outcome, 2, *fragments)
    assert_nothing_written(out.parent)


def test_a_missing_recipe_file_is_one_line(lowerkit, tmp_path):
    out = tmp_path / "m.pte"
    outcome = lowerkit("lower", "zoo:conv_linear", "-t", "coreml", "--recipe", str(tmp_path / "nope.toml"), "-o", str(out))
    assert_one_line_error(outcome, 2, "cannot read recipe file", "nope.toml")
