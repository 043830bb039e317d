"""lower_to_coreml on zoo models gives the .pte the CLI's Core ML path gave (lowering-cli 0.1.2).

``cli_path`` below is that path written out (``lowerkit.cli.coreml.lower`` before the recipes
moved into coreml-preprocess): compile options per target, pt2e int8 with lowerkit's
CoreMLQuantizer, torchao palettization, ``to_edge_transform_and_lower``. Both run in this
process on the same input; Core ML payloads are deterministic in lowerkit, so bytes compare.
"""

from __future__ import annotations

import copy
from typing import Any

import coremltools as ct
import pytest
import torch
from executorch.exir import to_edge_transform_and_lower

from lowerkit import zoo
from lowerkit.coreml_preprocess import (
    CoreMLCompileOptions,
    CoreMLPartitioner,
    WeightCompression,
    files_of,
    lower_to_coreml,
    unflatten_payload,
)

SPEC = "model.mlpackage/Data/com.apple.CoreML/model.mlmodel"
_WEIGHTS: dict[str, dict[str, Any]] = {
    "w8": {"mode": "linear_symmetric", "dtype": "int8", "granularity": "per_channel"},
    "w4": {"mode": "linear_symmetric", "dtype": "int4", "granularity": "per_block", "block_size": 32},
}
_CONVS_PALETTIZED = WeightCompression(
    {"method": "palettize", "nbits": 4, "mode": "kmeans", "granularity": "per_grouped_channel", "group_size": 16}
)
_DEPLOYMENT = {"int8": "iOS17", "w8": "iOS17", "w4": "iOS18", "palettize4": "iOS18"}


def _int8(program, inputs, calibration):
    from torchao.quantization.pt2e.quantize_pt2e import convert_pt2e, prepare_pt2e

    from lowerkit.coreml_quantizer import CoreMLQuantizer, static_int8_config

    prepared = prepare_pt2e(program.module(), CoreMLQuantizer(static_int8_config()))
    with torch.no_grad():
        for batch in calibration:
            prepared(*batch)
    return torch.export.export(convert_pt2e(prepared), inputs)


def _palettize4(module, inputs):
    from torchao.prototype.quantization.codebook_coreml import CodebookWeightOnlyConfig
    from torchao.quantization import quantize_

    module = copy.deepcopy(module)
    quantize_(
        module, CodebookWeightOnlyConfig(dtype=torch.uint4, block_size=[-1, 16]),
        lambda m, _: isinstance(m, torch.nn.Linear) and m.in_features % 16 == 0,
    )
    quantize_(
        module, CodebookWeightOnlyConfig(dtype=torch.uint4, block_size=[-1, -1]),
        lambda m, _: isinstance(m, torch.nn.Linear) and m.in_features % 16 != 0,
    )
    return torch.export.export(module, inputs)


def cli_path(module, inputs, recipe, calibration):
    """The .pte of lowering-cli 0.1.2's ``coreml.lower`` for the target of `recipe`.

    Since issue #16 palettize4 also palettizes every other weighted op (convolutions) after
    conversion: the compile option is spelled out here.
    """
    options = CoreMLCompileOptions(
        compute_precision=ct.precision.FLOAT32 if recipe == "fp32" else ct.precision.FLOAT16,
        minimum_deployment_target=_DEPLOYMENT.get(recipe),
        op_linear_quantizer_config=_WEIGHTS.get(recipe),
        weight_compression=_CONVS_PALETTIZED if recipe == "palettize4" else None,
    )
    program = torch.export.export(module, inputs)
    if recipe == "int8":
        program = _int8(program, inputs, calibration)
    elif recipe == "palettize4":
        program = _palettize4(module, inputs)
    edge = to_edge_transform_and_lower(program, partitioner=[CoreMLPartitioner(compile_specs=options)])
    return bytes(edge.to_executorch().buffer)


@pytest.mark.parametrize("recipe", ["fp16", "int8", "palettize4"])
def test_same_pte_as_the_cli_path(recipe):
    model = zoo.get("conv_linear")
    module, inputs, calibration = model.module(), model.example_inputs(), model.calibration(4)
    lowering = lower_to_coreml(module, inputs, recipe, calibration=calibration)
    assert lowering.pte == cli_path(module, inputs, recipe, calibration)
    for mlmodel, payload in zip(lowering.mlmodels, lowering.payloads, strict=True):
        spec = ct.proto.Model_pb2.Model()
        spec.ParseFromString(files_of(unflatten_payload(payload)[1])[SPEC])
        assert mlmodel.get_spec() == spec
    if recipe == "palettize4":
        assert lowering.reports[0].constexpr_ops == {"constexpr_lut_to_dense": 1}
        assert all(w.dtype.kind == "f" for w in lowering.decoded_weights[0].values())


def test_same_pte_as_the_cli_path_w4_small_weights():
    """Post-conversion weight quantization: conv_linear's weights are under the threshold."""
    model = zoo.get("conv_linear")
    module, inputs = model.module(), model.example_inputs()
    lowering = lower_to_coreml(module, inputs, "w4")
    assert lowering.pte == cli_path(module, inputs, "w4", [])
    assert lowering.options.minimum_deployment_target == ct.target.iOS18
    assert lowering.reports[0].constexpr_ops == {}
    assert "compressed none" in lowering.warnings[0]


@pytest.mark.parametrize(("name", "recipe"), [("cnn9_layernorm", "int8"), ("tiny_lm", "fp16")])
def test_accelerated_generic_stages_give_the_unaccelerated_bytes(name, recipe):
    """ExecuTorch's edge and emit stages under pass-infra's accelerated_lowering() (the default) vs
    lowerkit-unaccelerated (``accelerate=False``: the same lowerkit backend, those stages stock).

    Not stock ExecuTorch's Core ML backend, which cannot share this process: that comparison is
    tests/coreml_preprocess/test_sameness.py (and tests/real_models)."""
    model = zoo.get(name)
    module, inputs, calibration = model.module(), model.example_inputs(), model.calibration(4)
    accelerated = lower_to_coreml(module, inputs, recipe, calibration=calibration)
    unaccelerated = lower_to_coreml(module, inputs, recipe, calibration=calibration, accelerate=False)
    assert accelerated.pte == unaccelerated.pte
    assert accelerated.program is not None and unaccelerated.program is not None
    assert str(accelerated.program.graph) == str(unaccelerated.program.graph)
