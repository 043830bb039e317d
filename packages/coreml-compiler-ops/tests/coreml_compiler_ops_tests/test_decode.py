"""decode_constexpr_weights on hand-built MIL programs, checked against coremltools' own decompression."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import coremltools as ct
import numpy as np
import pytest
from coremltools.converters.mil import Builder as mb
from coremltools.converters.mil.mil import types

from lowerkit.coreml_compiler_ops import (
    UnsupportedOpError,
    constexpr_storage_bytes,
    decode_constexpr_weights,
    supported_constexpr_ops,
)

RNG = np.random.default_rng(0)


def _np(name: str) -> Any:
    return types.nptype_from_builtin(types.string_to_builtin(name))


def _references(program: Any) -> dict[str, np.ndarray]:
    """coremltools' numpy decompression of every constexpr op (computed before conversion)."""
    found: dict[str, np.ndarray] = {}
    for op in program.functions["main"].operations:
        if not op.op_type.startswith("constexpr_"):
            continue
        if (
            op.op_type == "constexpr_lut_to_dense" and op.lut.val is None
        ):  # a table that is itself constexpr
            found[op.outputs[0].name] = op.decompress(op.indices.val, found[op.lut.name], None)
        else:
            found[op.outputs[0].name] = np.asarray(op.materialized_val_inference())
    return found


def _convert(program: Any, target: Any) -> Any:
    return ct.convert(
        program,
        convert_to="mlprogram",
        minimum_deployment_target=target,
        compute_precision=ct.precision.FLOAT32,
        pass_pipeline=ct.PassPipeline.EMPTY,
        skip_model_load=True,
    )


def _ios18_program() -> Any:
    @mb.program(
        input_specs=[mb.TensorSpec(shape=(8, 4), dtype=types.fp32)], opset_version=ct.target.iOS18
    )
    def prog(x: Any) -> Any:
        shifted = mb.constexpr_blockwise_shift_scale(
            data=RNG.integers(-8, 8, (8, 4)).astype(_np("int4")),
            scale=RNG.random((2, 4)).astype(np.float32),
            offset=RNG.integers(-8, 8, (2, 4)).astype(_np("int4")),
            name="shift_int4",
        )
        grouped = mb.constexpr_lut_to_dense(
            indices=RNG.integers(0, 8, (8, 4)).astype(_np("uint3")),
            lut=RNG.random((4, 2, 8, 1)).astype(np.float32),
            name="lut_grouped_uint3",
        )
        vector = mb.constexpr_lut_to_dense(
            indices=RNG.integers(0, 4, (4, 4)).astype(_np("uint2")),
            lut=RNG.random((1, 2, 4, 2)).astype(np.float32),
            vector_axis=0,
            name="lut_vector",
        )
        mask = RNG.integers(0, 2, (8, 4)).astype(_np("uint1"))
        sparse = mb.constexpr_sparse_to_dense(
            nonzero_data=RNG.random(int(mask.sum())).astype(np.float32), mask=mask, name="sparse"
        )
        quantized_lut = mb.constexpr_blockwise_shift_scale(
            data=RNG.integers(0, 256, (1, 1, 16, 1)).astype(np.uint8),
            scale=np.full((1, 1, 1, 1), 0.5, dtype=np.float32),
            name="lut_values_uint8",
        )
        nested = mb.constexpr_lut_to_dense(
            indices=RNG.integers(0, 16, (8, 4)).astype(_np("uint4")),
            lut=quantized_lut,
            name="lut_nested",
        )
        total = x
        for weight in (shifted, grouped, vector, sparse, nested):
            total = mb.add(x=total, y=weight)
        return total

    return prog


def _ios16_program() -> Any:
    @mb.program(
        input_specs=[mb.TensorSpec(shape=(6, 5), dtype=types.fp32)], opset_version=ct.target.iOS16
    )
    def prog(x: Any) -> Any:
        affine = mb.constexpr_affine_dequantize(
            quantized_data=RNG.integers(0, 256, (6, 5)).astype(np.uint8),
            zero_point=RNG.integers(0, 256, (5,)).astype(np.uint8),
            scale=RNG.random(5).astype(np.float32),
            axis=1,
            name="affine_axis1",
        )
        lut = mb.constexpr_lut_to_dense(
            indices=RNG.integers(0, 256, (23,)).astype(np.uint8),  # 30 six-bit codes, packed
            lut=RNG.random(64).astype(np.float32),
            shape=np.array([6, 5], dtype=np.uint32),
            name="lut_6bit_packed",
        )
        mask = RNG.integers(0, 256, (4,)).astype(np.uint8)
        bits = int(np.unpackbits(mask, bitorder="little")[:30].sum())
        sparse = mb.constexpr_sparse_to_dense(
            nonzero_data=RNG.random(bits).astype(np.float32),
            mask=mask,
            shape=np.array([6, 5], dtype=np.uint32),
            name="sparse_packed",
        )
        cast = mb.constexpr_cast(
            source_val=RNG.random((6, 5)).astype(np.float16), output_dtype="fp32", name="cast"
        )
        total = x
        for weight in (affine, lut, sparse, cast):
            total = mb.add(x=total, y=weight)
        return total

    return prog


@pytest.mark.parametrize(
    ("build", "target"), [(_ios18_program, ct.target.iOS18), (_ios16_program, ct.target.iOS16)]
)
def test_matches_coremltools_decompression_from_every_input_kind(
    build: Any, target: Any, tmp_path: Path
) -> None:
    program = build()
    expected = _references(program)
    mlmodel = _convert(program, target)
    from_model = decode_constexpr_weights(mlmodel)
    from_program = decode_constexpr_weights(mlmodel._mil_program)
    package = tmp_path / "model.mlpackage"
    mlmodel.save(str(package))
    weights_dir = package / "Data" / "com.apple.CoreML" / "weights"
    from_spec = decode_constexpr_weights(mlmodel.get_spec(), weights_dir=weights_dir)
    assert sorted(from_model) == sorted(expected) == sorted(from_program) == sorted(from_spec)
    for name, reference in expected.items():
        for decoded in (from_model, from_program, from_spec):
            assert decoded[name].shape == reference.shape, name
            np.testing.assert_array_equal(
                decoded[name], reference.astype(decoded[name].dtype), err_msg=name
            )
    assert constexpr_storage_bytes(mlmodel) == constexpr_storage_bytes(mlmodel._mil_program)


def test_storage_bytes_count_sub_byte_types_packed() -> None:
    sizes = constexpr_storage_bytes(_convert(_ios18_program(), ct.target.iOS18))
    assert (
        sizes["shift_int4"] == 8 * 4 // 2 + 2 * 4 * 4 + 2 * 4 // 2
    )  # int4 data + fp32 scale + int4 offset
    assert sizes["lut_grouped_uint3"] == (8 * 4 * 3 + 7) // 8 + 4 * 2 * 8 * 4


def test_spec_with_blob_weights_needs_weights_dir() -> None:
    mlmodel = _convert(_ios18_program(), ct.target.iOS18)
    with pytest.raises(ValueError, match="weights_dir"):
        decode_constexpr_weights(mlmodel.get_spec())


def test_unsupported_constexpr_op_is_named() -> None:
    @mb.program(
        input_specs=[mb.TensorSpec(shape=(4, 4), dtype=types.fp32)], opset_version=ct.target.iOS18
    )
    def prog(x: Any) -> Any:
        mask, indices = mb.constexpr_lut_to_sparse(
            indices_mask=np.ones((4, 4), dtype=_np("uint1")),
            indices_nonzero_data=RNG.integers(0, 4, (16,)).astype(_np("uint2")),
            lut=RNG.random((1, 1, 4, 1)).astype(np.float32),
        )
        return mb.add(x=x, y=mb.constexpr_sparse_to_dense(nonzero_data=indices, mask=mask))

    with pytest.raises(UnsupportedOpError) as info:
        decode_constexpr_weights(prog)
    assert info.value.op == "constexpr_lut_to_sparse"
    assert info.value.supported == supported_constexpr_ops()
    assert "constexpr_lut_to_dense" in str(info.value)


def test_rejects_other_objects() -> None:
    with pytest.raises(TypeError, match="MLModel"):
        decode_constexpr_weights(object())
