"""The produced TOSA flatbuffers compute the model: run on the TOSA reference model (tosa-tools).

INT: dequantized TOSA output equals torch's fake-quantized output (the converted pt2e program
run in torch) exactly: zero error, on the example input and three calibration batches — on every
zoo CNN but the LayerNorm one, which is within 2 output quanta (see INT_QUANTA_TOLERANCE).
FP: within 1e-5 relative (to the largest output magnitude) of eager.
"""

from __future__ import annotations

import math

import pytest
import torch

from arm.conftest import CI_MODEL, goldens, lowered
from golden.arm import fingerprint
from lowerkit import zoo
from lowerkit.arm_passes import ArmLoweringError, verify_on_reference_model


def test_int_output_equals_fake_quantized_torch() -> None:
    lowering = lowered(CI_MODEL, "TOSA-1.0+INT")
    assert len(lowering.tosa_flatbuffers) == 1
    model = zoo.get(CI_MODEL)
    for inputs in [model.example_inputs(), *model.calibration(3, 7)]:
        check = verify_on_reference_model(lowering, inputs)
        assert check.compared == "TOSA reference model vs torch fake-quantized program"
        assert check.max_abs_error == 0.0, check
        assert math.isinf(check.sqnr_db)


#: Largest error allowed, in output quanta, between TOSA INT and torch's fake-quantized program.
#: ExecuTorch's pipeline decomposes LayerNorm into integer ops (mean, variance, an rsqrt table,
#: int32 rescales) that round differently from the float LayerNorm between fake-quant pairs;
#: stock ExecuTorch gives the same bytes (the golden check below), so this is its numerics.
INT_QUANTA_TOLERANCE = {"resnet8": 0.0, "mobilenet_v1_025": 0.0, "cnn9_layernorm": 2.0}


@pytest.mark.parametrize("model", sorted(INT_QUANTA_TOLERANCE))
def test_int_output_on_the_other_zoo_cnns(model: str) -> None:
    """Each zoo CNN's TOSA INT flatbuffer: stock's bytes, and torch's fake-quantized output within tolerance."""
    lowering = lowered(model, "TOSA-1.0+INT")
    assert fingerprint(lowering) == goldens()[f"{model}/TOSA-1.0+INT"]
    check = verify_on_reference_model(lowering, zoo.get(model).example_inputs())
    assert check.max_error_quanta is not None and check.max_error_quanta <= INT_QUANTA_TOLERANCE[model], check


def test_fp_output_within_1e5_relative_of_eager() -> None:
    lowering = lowered(CI_MODEL, "TOSA-1.0+FP")
    model = zoo.get(CI_MODEL)
    inputs = model.example_inputs()
    with torch.no_grad():
        scale = float(model.module()(*inputs).abs().max())
    check = verify_on_reference_model(lowering, inputs)
    assert "float" in check.compared
    assert check.max_abs_error <= 1e-5 * scale, check
    assert check.sqnr_db > 80.0, check


def test_reference_check_needs_one_full_partition() -> None:
    import dataclasses

    lowering = lowered(CI_MODEL, "TOSA-1.0+FP")
    partial = dataclasses.replace(lowering, cpu_ops=("aten::topk",))
    try:
        verify_on_reference_model(partial, zoo.get(CI_MODEL).example_inputs())
    except ArmLoweringError as error:
        assert "fully delegated" in str(error)
    else:
        raise AssertionError("expected ArmLoweringError")


def test_vela_compiles_for_u55_and_u85() -> None:
    for target in ("ethos-u55-128", "ethos-u85-256"):
        lowering = lowered(CI_MODEL, target)
        assert len(lowering.vela_binaries) == 1 == len(lowering.tosa_flatbuffers)
        payload = lowering.vela_binaries[0]
        assert payload.startswith(b"vela_bin_stream\x00"), payload[:16]
        assert b"cmd_data" in payload[:4096] and len(payload) > 1000
