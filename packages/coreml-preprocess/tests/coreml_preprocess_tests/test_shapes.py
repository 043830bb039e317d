"""`--shapes` parsing and the export with dynamic dimensions (tests/coreml_preprocess/test_shapes.py lowers)."""

from __future__ import annotations

import pytest
import torch

from lowerkit.coreml_preprocess import CoreMLOptionsError
from lowerkit.coreml_preprocess.shapes import export_with_shapes, parse_shapes


def test_parse_shapes():
    assert parse_shapes("x=1x3x32x32,1x3x64x64") == {"x": ((1, 3, 32, 32), (1, 3, 64, 64))}
    assert parse_shapes("1x8, 2x8") == {"x": ((1, 8), (2, 8))}
    assert parse_shapes("a=1x8,2x8; b=4,5") == {"a": ((1, 8), (2, 8)), "b": ((4,), (5,))}


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("x=1x3,1xthree", "invalid shapes 'x=1x3,1xthree'"),
        ("x=1x3", "needs at least two shapes"),
        ("x=1x3,1x3x4", "same rank"),
        ("x=1x3,2x3;x=1x3,3x3", "given twice"),
        ("", "no shapes given"),
    ],
)
def test_bad_shapes_are_one_line(text, message):
    with pytest.raises(CoreMLOptionsError, match=message) as error:
        parse_shapes(text)
    assert "\n" not in str(error.value)


class _Pointwise(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.conv = torch.nn.Conv2d(3, 4, 1)

    def forward(self, image: torch.Tensor) -> torch.Tensor:
        return torch.relu(self.conv(image))


def test_export_makes_the_varying_dimensions_dynamic():
    shapes = {"image": [(1, 3, 8, 8), (1, 3, 16, 12)]}
    program = export_with_shapes(_Pointwise(), (torch.zeros(1, 3, 8, 8),), shapes)
    placeholder = next(n for n in program.graph.nodes if n.op == "placeholder" and n.name == "image")
    dims = [isinstance(d, torch.SymInt) for d in placeholder.meta["val"].shape]
    assert dims == [False, False, True, True]


def test_export_errors_name_the_input():
    with pytest.raises(CoreMLOptionsError, match="shapes given for 'x', which is not an input; the inputs are: image"):
        export_with_shapes(_Pointwise(), (torch.zeros(1, 3, 8, 8),), {"x": [(1, 3, 8, 8), (1, 3, 4, 4)]})
    with pytest.raises(CoreMLOptionsError, match=r"the example input's shape \[1, 3, 8, 8\] must be one of"):
        export_with_shapes(_Pointwise(), (torch.zeros(1, 3, 8, 8),), {"image": [(1, 3, 4, 4), (1, 3, 2, 2)]})
