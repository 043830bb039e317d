"""lower_to_coreml on a small conv + linear model: recipes, the captured MLModel, errors.

Core ML cannot run on Linux: the MIL program and the model spec are checked, not predictions.
"""

from __future__ import annotations

import re
from contextlib import contextmanager
from typing import Any

import coremltools as ct
import numpy as np
import pytest
import torch
from executorch.exir import to_edge_transform_and_lower

from lowerkit.coreml_preprocess import (
    RECIPES,
    CoreMLLowering,
    CoreMLLoweringError,
    CoreMLOptionsError,
    CoreMLPartitioner,
    compile_options_for,
    files_of,
    lower_to_coreml,
    unflatten_payload,
)

SPEC = "model.mlpackage/Data/com.apple.CoreML/model.mlmodel"


class ConvLinear(torch.nn.Module):
    """A conv and a 64x64 linear layer: more than coremltools' 2048-element threshold."""

    def __init__(self) -> None:
        super().__init__()
        self.conv = torch.nn.Conv2d(3, 4, 3, padding=1)
        self.linear = torch.nn.Linear(64, 64)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.linear(torch.relu(self.conv(x)).flatten(2))


def _model() -> tuple[torch.nn.Module, tuple[torch.Tensor, ...]]:
    torch.manual_seed(0)
    return ConvLinear().eval(), (torch.randn(1, 3, 8, 8),)


_CACHE: dict[str, CoreMLLowering] = {}


def _lowered(recipe: str) -> CoreMLLowering:
    if recipe not in _CACHE:
        module, inputs = _model()
        _CACHE[recipe] = lower_to_coreml(module, inputs, recipe)
    return _CACHE[recipe]


def _payload_spec(payload: bytes) -> object:
    spec = ct.proto.Model_pb2.Model()
    spec.ParseFromString(files_of(unflatten_payload(payload)[1])[SPEC])
    return spec


def _op_types(mlmodel: object) -> list[str]:
    program = mlmodel._mil_program  # type: ignore[attr-defined]
    return [op.op_type for f in program.functions.values() for op in f.operations]


@pytest.mark.parametrize("recipe", ["fp16", "int8", "w8"])
def test_mlmodel_is_the_payloads(recipe):
    lowering = _lowered(recipe)
    assert len(lowering.mlmodels) == len(lowering.payloads) == len(lowering.reports) == 1
    assert lowering.mlmodel.get_spec() == _payload_spec(lowering.payloads[0])
    assert lowering.reports[0].payload_bytes == len(lowering.payloads[0])
    assert lowering.fully_delegated and lowering.warnings == ()


def test_pte_is_the_manual_path():
    module, inputs = _model()
    options = compile_options_for("w8")
    edge = to_edge_transform_and_lower(
        torch.export.export(module, inputs), partitioner=[CoreMLPartitioner(compile_specs=options)]
    )
    assert bytes(edge.to_executorch().buffer) == _lowered("w8").pte


def test_fp16_program():
    lowering = _lowered("fp16")
    assert lowering.options.compute_precision == ct.precision.FLOAT16
    assert lowering.options.minimum_deployment_target is None
    assert "conv" in _op_types(lowering.mlmodel) and "linear" in _op_types(lowering.mlmodel)
    assert lowering.reports[0].constexpr_ops == {}
    assert lowering.decoded_weights == ({},)
    assert lowering.reference is None


def test_w8_compresses_the_linear_weight_and_decodes_it():
    lowering = _lowered("w8")
    assert lowering.options.minimum_deployment_target == ct.target.iOS17
    assert lowering.reports[0].constexpr_ops == {"constexpr_affine_dequantize": 1}
    (weight,) = lowering.decoded_weights[0].values()
    expected = _model()[0].linear.weight.detach().numpy()
    assert weight.shape == expected.shape
    # int8 per channel: within half a step (max / 127) of each row's float weights.
    step = np.abs(expected).max(axis=1, keepdims=True) / 127
    assert np.all(np.abs(weight - expected) <= step * 0.51 + 1e-3)


def test_int8_quantizes_activations():
    lowering = _lowered("int8")
    ops = _op_types(lowering.mlmodel)
    assert "quantize" in ops and "dequantize" in ops
    assert lowering.reports[0].constexpr_ops == {"constexpr_affine_dequantize": 2}
    assert lowering.reference is not None and lowering.source_program is not None


def test_progress_sees_each_step():
    seen: list[str] = []

    @contextmanager
    def progress(name):
        seen.append(name)
        yield

    module, inputs = _model()
    lower_to_coreml(module, inputs, "fp32", progress=progress)
    assert seen == ["export", "lower to Core ML", "serialize"]


def test_small_weights_warn():
    lowering = lower_to_coreml(torch.nn.Linear(4, 4).eval(), (torch.randn(1, 4),), "w8")
    assert lowering.warnings and "compressed none" in lowering.warnings[0]


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"recipe": "fp61"}, "unknown Core ML recipe 'fp61'. Did you mean 'fp16'?"),
        ({"recipe": "palletize4"}, "Did you mean 'palettize4'?"),
        ({"deployment_target": "ios18"}, "Did you mean 'iOS18'?"),
        ({"recipe": "w4", "deployment_target": "iOS17"}, "needs deployment target iOS18 or later"),
        ({"pass_pipeline": ["common::dead_code_elimnation"]}, "Did you mean 'common::dead_code_elimination'"),
    ],
)
def test_bad_options_fail_before_any_work(kwargs, message):
    module, inputs = _model()
    with pytest.raises(CoreMLOptionsError, match=re.escape(message)):
        lower_to_coreml(module, inputs, **kwargs)


def test_bad_model_and_calibration():
    with pytest.raises(CoreMLLoweringError, match=r"needs a torch\.nn\.Module"):
        not_a_model: Any = "model.pt2"
        lower_to_coreml(not_a_model, (torch.randn(1),))
    module, inputs = _model()
    with pytest.raises(CoreMLLoweringError, match="calibration is empty"):
        lower_to_coreml(module, inputs, "int8", calibration=[])


def test_every_recipe_has_options():
    for name in RECIPES:
        assert compile_options_for(name).compute_precision in (ct.precision.FLOAT16, ct.precision.FLOAT32)
