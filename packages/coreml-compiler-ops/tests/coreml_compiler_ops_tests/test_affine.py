"""IntxWeightOnlyConfig / Int8WeightOnlyConfig weights -> constexpr dequantization, decoded back."""

from __future__ import annotations

from typing import Any

import coremltools as ct
import numpy as np
import pytest
import torch
from torchao.quantization import Int8WeightOnlyConfig, IntxWeightOnlyConfig
from torchao.quantization.granularity import PerAxis, PerGroup
from torchao.quantization.quant_primitives import dequantize_affine

from coreml_compiler_ops_tests.conftest import (
    apply_config,
    by_layer,
    constexpr_ops,
    convert,
    dequantized_weights,
    fp16_ulp,
    fresh_model,
)
from lowerkit.coreml_compiler_ops import (
    UnsupportedOpError,
    constexpr_storage_bytes,
    decode_constexpr_weights,
)

RANGES = {torch.int4: (-8, 7), torch.int8: (-128, 127)}

CONFIGS: dict[str, tuple[Any, int]] = {
    "intx_int4_per_group": (
        IntxWeightOnlyConfig(weight_dtype=torch.int4, granularity=PerGroup(32)),
        4,
    ),
    "intx_int4_per_channel": (
        IntxWeightOnlyConfig(weight_dtype=torch.int4, granularity=PerAxis(0)),
        4,
    ),
    "intx_int8_per_group": (
        IntxWeightOnlyConfig(weight_dtype=torch.int8, granularity=PerGroup(32)),
        8,
    ),
    "intx_int8_per_channel": (
        IntxWeightOnlyConfig(weight_dtype=torch.int8, granularity=PerAxis(0)),
        8,
    ),
    "int8_weight_only": (Int8WeightOnlyConfig(), 8),
}


def _fp16_scale_reference(model: torch.nn.Module, layer: str) -> np.ndarray:
    """torchao's dequantize_affine with the scale rounded to fp16, as a float16 Core ML model stores it."""
    weight = model.get_parameter(f"{layer}.weight")
    quant_min, quant_max = RANGES.get(getattr(weight, "target_dtype", torch.int8), (-128, 127))
    with torch.no_grad():
        dense = dequantize_affine(
            weight.qdata,
            list(weight.block_size),
            weight.scale.half().float(),
            weight.zero_point,
            torch.int8,
            quant_min,
            quant_max,
        )
    return dense.numpy().astype(np.float16)


def _check(mlmodel: Any, model: torch.nn.Module, expected_op: str, nbits: int) -> None:
    assert constexpr_ops(mlmodel) == [expected_op, expected_op]
    decoded = decode_constexpr_weights(mlmodel)
    reference = dequantized_weights(model)
    for layer, dense in by_layer(decoded).items():
        assert dense.dtype == np.float16
        # Within one fp16 ulp of torchao's dequantization with the fp16 scale Core ML stores ...
        ref16 = _fp16_scale_reference(model, layer).astype(np.float32)
        assert np.all(np.abs(dense.astype(np.float32) - ref16) <= fp16_ulp(ref16))
        # ... and within 1.5 ulp of torchao's float32 result (fp16 scale rounding + output rounding).
        ref32 = reference[layer]
        assert np.all(np.abs(dense.astype(np.float32) - ref32) <= 1.5 * fp16_ulp(ref32))
        np.testing.assert_array_equal(
            by_layer(decode_constexpr_weights(mlmodel._mil_program))[layer], dense
        )
    stored = sum(constexpr_storage_bytes(mlmodel).values())
    ratio = sum(d.size * 2 for d in decoded.values()) / stored
    assert 0.85 * 16 / nbits <= ratio <= 16 / nbits


@pytest.mark.parametrize("name", sorted(CONFIGS))
def test_ios18_blockwise_shift_scale(name: str) -> None:
    config, nbits = CONFIGS[name]
    model = apply_config(fresh_model(), config)
    _check(convert(model, ct.target.iOS18), model, "constexpr_blockwise_shift_scale", nbits)


@pytest.mark.parametrize("name", ["intx_int8_per_channel", "int8_weight_only"])
@pytest.mark.parametrize("target", [ct.target.iOS16, ct.target.iOS17])
def test_before_ios18_affine_dequantize(name: str, target: Any) -> None:
    config, nbits = CONFIGS[name]
    model = apply_config(fresh_model(), config)
    _check(convert(model, target), model, "constexpr_affine_dequantize", nbits)


def test_float32_model_decodes_to_torchao_exactly() -> None:
    model = apply_config(fresh_model(), CONFIGS["intx_int4_per_group"][0])
    decoded = by_layer(
        decode_constexpr_weights(convert(model, ct.target.iOS18, ct.precision.FLOAT32))
    )
    for layer, dense in dequantized_weights(model).items():
        assert decoded[layer].dtype == np.float32
        np.testing.assert_array_equal(decoded[layer], dense)


def test_int8_weight_only_linear_keeps_float_weights_out_of_the_model() -> None:
    """The linear's mm(x, int8.t().float()) * scale becomes one linear on a constexpr weight."""
    mlmodel = convert(apply_config(fresh_model(), Int8WeightOnlyConfig()), ct.target.iOS18)
    ops = [op.op_type for op in mlmodel._mil_program.functions["main"].operations]
    assert "mul" not in ops and "matmul" not in ops
    fp_consts = [
        op.outputs[0]
        for op in mlmodel._mil_program.functions["main"].operations
        if op.op_type == "const"
        and op.outputs[0].val is not None
        and np.asarray(op.outputs[0].val).size >= 32 * 64
    ]
    assert [v.name for v in fp_consts if np.asarray(v.val).dtype.kind == "f"] == []


@pytest.mark.parametrize(
    ("name", "target", "needle"),
    [
        ("intx_int4_per_channel", ct.target.iOS17, "int4 weights need iOS18"),
        ("intx_int8_per_group", ct.target.iOS16, "needs iOS18"),
    ],
)
def test_not_expressible_before_ios18(name: str, target: Any, needle: str) -> None:
    model = apply_config(fresh_model(), CONFIGS[name][0])
    with pytest.raises(UnsupportedOpError) as info:
        convert(model, target)
    assert info.value.op == "torchao.dequantize_affine"
    assert needle in str(info.value) and "iOS18" in info.value.hint


def test_range_without_core_ml_type_is_a_clear_error() -> None:
    model = apply_config(
        fresh_model(), IntxWeightOnlyConfig(weight_dtype=torch.int2, granularity=PerAxis(0))
    )
    with pytest.raises(UnsupportedOpError) as info:
        convert(model, ct.target.iOS18)
    assert info.value.op == "torchao.dequantize_affine"
    assert "[-2, 1]" in str(info.value)
    assert "[-8, 7] (int4)" in info.value.supported
