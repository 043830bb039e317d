"""`lowerkit lower --shapes`: Core ML enumerated input shapes, shown by `lowerkit inspect`."""

from __future__ import annotations

import json

import pytest

from cli_tests.test_errors import assert_nothing_written, assert_one_line_error


def test_shapes_reach_the_delegate_and_inspect_shows_them(lowerkit, tmp_path):
    out = tmp_path / "m.pte"
    outcome = lowerkit("lower", "zoo:conv_linear", "-t", "coreml", "--shapes", "x=1x3x16x16,1x3x32x32", "-o", str(out), "-q")
    assert outcome.code == 0, outcome.err
    shown = lowerkit("inspect", str(out), "--no-weights")
    assert shown.code == 0, shown.err
    assert "input x: enumerated shapes 1x3x16x16 | 1x3x32x32" in shown.out
    specs = json.loads(lowerkit("inspect", str(out), "--json", "--no-weights").out)["methods"][0]["delegates"][0]["compile_specs"]
    assert "enumerated_shapes" in specs


@pytest.mark.parametrize(
    ("target", "shapes", "fragment"),
    [
        ("coreml", "x=1x3x16,1x3x16x16", "--shapes: the shapes of input 'x' must have the same rank"),
        ("coreml", "image=1x3x16x16,1x3x32x32", "shapes given for 'image', which is not an input; the inputs are: x"),
        ("tosa-int", "x=1x3x16x16,1x3x32x32", "--shapes applies to Core ML targets, not 'tosa-int'"),
        ("coreml-int8", "x=1x3x16x16,1x3x32x32", "enumerated shapes work with recipes that quantize after conversion, not 'int8'"),
    ],
)
def test_bad_shapes_are_one_line(lowerkit, tmp_path, target, shapes, fragment):
    out = tmp_path / "out" / "m.pte"
    out.parent.mkdir()
    outcome = lowerkit("lower", "zoo:conv_linear", "-t", target, "--shapes", shapes, "-o", str(out), "-q")
    assert_one_line_error(outcome, 2, fragment)
    assert_nothing_written(out.parent)
