"""CodebookWeightOnlyConfig weights -> constexpr_lut_to_dense, decoded back exactly."""

from __future__ import annotations

import coremltools as ct
import numpy as np
import pytest
import torch
from torchao.prototype.quantization.codebook_coreml import CodebookWeightOnlyConfig

from coreml_compiler_ops_tests.conftest import (
    apply_codebook,
    apply_config,
    by_layer,
    constexpr_ops,
    convert,
    dequantized_weights,
    fresh_model,
)
from lowerkit.coreml_compiler_ops import (
    UnsupportedOpError,
    constexpr_storage_bytes,
    decode_constexpr_weights,
)

CODE_DTYPES = {
    1: torch.uint1,
    2: torch.uint2,
    3: torch.uint3,
    4: torch.uint4,
    5: torch.uint5,
    6: torch.uint6,
    7: torch.uint7,
    8: torch.uint8,
}
# Core ML stores LUT indices as uint1/2/4/6/8 (iOS16) or uint1/2/3/4/6/8 (iOS18): other widths are widened.
STORED_BITS_IOS18 = {1: 1, 2: 2, 3: 3, 4: 4, 5: 6, 6: 6, 7: 8, 8: 8}
STORED_BITS_IOS16 = {1: 1, 2: 2, 3: 4, 4: 4, 5: 6, 6: 6, 7: 8, 8: 8}


def _check(mlmodel, model, stored_bits: int, tables: dict[str, int]) -> None:
    assert constexpr_ops(mlmodel) == ["constexpr_lut_to_dense", "constexpr_lut_to_dense"]
    decoded = decode_constexpr_weights(mlmodel)
    assert decoded.keys() == decode_constexpr_weights(mlmodel._mil_program).keys()
    reference = dequantized_weights(model)
    for layer, dense in by_layer(decoded).items():
        # Exact: every decoded value is the fp16 codebook entry torchao looks up.
        assert dense.dtype == np.float16
        np.testing.assert_array_equal(dense, reference[layer].astype(np.float16))
        program_dense = by_layer(decode_constexpr_weights(mlmodel._mil_program))[layer]
        np.testing.assert_array_equal(program_dense, dense)

    stored = constexpr_storage_bytes(mlmodel)
    for name, dense in decoded.items():
        layer = "emb" if dense.shape[0] == 128 else "lin"
        expected = (dense.size * stored_bits + 7) // 8 + tables[layer] * 2**stored_bits * 2
        if mlmodel.get_spec().specificationVersion < 9:
            expected += 4 * dense.ndim  # iOS16 keeps the output shape as uint32
        assert stored[name] == expected
    ratio = sum(d.size * 2 for d in decoded.values()) / sum(stored.values())
    assert 0.85 * 16 / stored_bits <= ratio <= 16 / stored_bits


@pytest.mark.parametrize("nbits", range(1, 9))
def test_per_tensor_ios18(nbits: int) -> None:
    model = apply_codebook(fresh_model(), CODE_DTYPES[nbits], nbits, [-1, -1], seed=nbits)
    _check(convert(model, ct.target.iOS18), model, STORED_BITS_IOS18[nbits], {"emb": 1, "lin": 1})


@pytest.mark.parametrize("nbits", range(1, 9))
def test_per_tensor_ios16(nbits: int) -> None:
    model = apply_codebook(fresh_model(), CODE_DTYPES[nbits], nbits, [-1, -1], seed=nbits)
    mlmodel = convert(model, ct.target.iOS16)
    assert mlmodel.get_spec().specificationVersion == 7
    _check(mlmodel, model, STORED_BITS_IOS16[nbits], {"emb": 1, "lin": 1})


@pytest.mark.parametrize(
    ("nbits", "block_size", "tables"),
    [
        (4, [8, -1], {"emb": 16, "lin": 4}),  # per block of 8 rows
        (2, [1, -1], {"emb": 128, "lin": 32}),  # per row
        (3, [-1, 16], {"emb": 4, "lin": 4}),  # per block of 16 columns
        (5, [-1, 32], {"emb": 2, "lin": 2}),
    ],
)
def test_grouped_tables_ios18(nbits: int, block_size: list[int], tables: dict[str, int]) -> None:
    model = apply_codebook(fresh_model(), CODE_DTYPES[nbits], nbits, block_size, seed=7)
    mlmodel = convert(model, ct.target.iOS18)
    stored_bits = STORED_BITS_IOS18[nbits]
    if block_size == [1, -1]:
        # One table per row: the tables outweigh the codes, so only the exact byte count is checked.
        decoded = decode_constexpr_weights(mlmodel)
        reference = dequantized_weights(model)
        for layer, dense in by_layer(decoded).items():
            np.testing.assert_array_equal(dense, reference[layer].astype(np.float16))
        stored = constexpr_storage_bytes(mlmodel)
        assert sorted(stored.values()) == sorted(
            [
                (32 * 64 * stored_bits + 7) // 8 + 32 * 4 * 2,
                (128 * 64 * stored_bits + 7) // 8 + 128 * 4 * 2,
            ]
        )
        return
    _check(mlmodel, model, stored_bits, tables)


def test_torchao_kmeans_config_end_to_end() -> None:
    """The real CodebookWeightOnlyConfig (torchao's k-means) on a per-column-block layout."""
    model = apply_config(
        fresh_model(), CodebookWeightOnlyConfig(dtype=torch.uint2, block_size=[-1, 32])
    )
    _check(convert(model, ct.target.iOS18), model, 2, {"emb": 2, "lin": 2})


def test_several_tables_before_ios18_is_a_clear_error() -> None:
    model = apply_codebook(fresh_model(), torch.uint4, 4, [8, -1])
    with pytest.raises(UnsupportedOpError) as info:
        convert(model, ct.target.iOS17)
    error = info.value
    assert error.op == "quant.dequantize_codebook"
    assert "[8, -1]" in str(error) and "iOS18" in str(error)
    assert any("one table per tensor" in s for s in error.supported)


def test_tables_over_both_dimensions_are_a_clear_error() -> None:
    """torchao can describe 2-D blocks of tables; Core ML's LUT ops cannot (on any target)."""
    model = apply_codebook(fresh_model(), torch.uint4, 4, [16, 32])
    with pytest.raises(UnsupportedOpError) as info:
        convert(model, ct.target.iOS18)
    assert info.value.op == "quant.dequantize_codebook"
    assert "block_size [16, 32]" in str(info.value)
    assert any("block of columns" in s for s in info.value.supported)
