"""Enumerated input shapes through ExecuTorch's dynamic-shape export, checked on the Core ML model spec.

Core ML cannot run on Linux: the converted model's input description (its ``enumeratedShapes``)
and the delegate's compile spec are checked, not outputs. Same bytes in another process:
test_compression.py's two-process test covers this option too.
"""

from __future__ import annotations

import pytest

from lowerkit import zoo
from lowerkit.coreml_preprocess import CoreMLCompileOptions, CoreMLOptionsError, lower_to_coreml
from lowerkit.coreml_preprocess.shapes import parse_shapes

SHAPES = "x=1x3x16x16,1x3x32x32,1x3x24x24"


def test_enumerated_shapes_reach_the_core_ml_model_and_the_compile_specs():
    entry = zoo.get("conv_linear")
    lowering = lower_to_coreml(entry.module(), entry.example_inputs(), "fp16", enumerated_shapes=parse_shapes(SHAPES))
    (spec_input,) = lowering.mlmodel.get_spec().description.input
    enumerated = spec_input.type.multiArrayType.enumeratedShapes.shapes
    assert sorted(tuple(s.shape) for s in enumerated) == [(1, 3, 16, 16), (1, 3, 24, 24), (1, 3, 32, 32)]
    assert lowering.fully_delegated
    assert lowering.program is not None
    (delegate,) = [n for n in lowering.program.graph_module.children()]
    specs = CoreMLCompileOptions.from_compile_specs(delegate.compile_specs)
    assert specs.enumerated_shapes == {"x": ((1, 3, 16, 16), (1, 3, 32, 32), (1, 3, 24, 24))}


def test_enumerated_shapes_refuse_torch_side_quantization():
    entry = zoo.get("conv_linear")
    with pytest.raises(CoreMLOptionsError, match="not 'palettize4'"):
        lower_to_coreml(entry.module(), entry.example_inputs(), "palettize4", enumerated_shapes=parse_shapes(SHAPES))
