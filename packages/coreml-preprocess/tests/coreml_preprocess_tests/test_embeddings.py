"""Embedding tables under linear weight quantization, on hand-built MIL programs."""

from __future__ import annotations

import copy

import coremltools as ct
import coremltools.optimize as cto
import numpy as np
import pytest
from coremltools.converters.mil import Builder as mb
from coremltools.converters.mil.mil import types
from coremltools.converters.mil.mil.passes.pass_registry import PASS_REGISTRY

from lowerkit.coreml_preprocess import find_embedding_tables
from lowerkit.coreml_preprocess.embeddings import optimization_config

TABLE = np.random.RandomState(0).randn(64, 32).astype(np.float16)
PLAIN = np.random.RandomState(1).randn(64, 32).astype(np.float16)
INTS = np.random.RandomState(2).randint(-100, 100, (64, 32)).astype(np.int32)
INT8 = cto.coreml.OpLinearQuantizerConfig(
    mode="linear_symmetric", dtype="int8", granularity="per_channel", weight_threshold=0
)


def _program():
    specs = [
        mb.TensorSpec(shape=(4,), dtype=types.int32),
        mb.TensorSpec(shape=(1, 32), dtype=types.fp16),
        mb.TensorSpec(shape=(1,), dtype=types.bool),
    ]

    @mb.program(input_specs=specs, opset_version=ct.target.iOS18)
    def program(idx, hidden, flag):
        table = mb.const(val=TABLE, name="tied_table")

        def then_branch():
            return mb.gather(x=table, indices=idx, axis=0, name="nested_gather_a")

        def else_branch():
            return mb.gather(x=table, indices=idx, axis=0, name="nested_gather_b")

        embedded = mb.cond(pred=mb.squeeze(x=flag), _true_fn=then_branch, _false_fn=else_branch)
        logits = mb.linear(x=hidden, weight=table, name="head")
        plain = mb.gather(x=mb.const(val=PLAIN, name="plain_table"), indices=idx, axis=0, name="plain_gather")
        ints = mb.const(val=INTS, name="int_table")
        gathered_ints = mb.gather(x=ints, indices=idx, axis=0, name="int_gather")
        shifted = mb.add(x=ints, y=np.int32(1), name="int_add")
        return embedded, logits, plain, gathered_ints, shifted

    return program


def _quantize(program, *, quantize_embedding_tables):
    program = copy.deepcopy(program)
    config = optimization_config(program, INT8, quantize_embedding_tables=quantize_embedding_tables)
    quantizer = PASS_REGISTRY["compression::linear_quantize_weights"]
    quantizer.config = config
    quantizer(program)
    return program


def _table_source(program, gather_name):
    def walk(block):
        for op in block.operations:
            yield op
            for nested in op.blocks:
                yield from walk(nested)

    gather = next(op for op in walk(program.functions["main"]) if op.name == gather_name)
    return gather.x.op.op_type


def test_classification_scans_nested_blocks_and_dtypes():
    tables = find_embedding_tables(_program())
    assert tables.tied == ("nested_gather_a", "nested_gather_b")
    assert tables.untied == ("plain_gather",)
    assert tables.non_float == ("int_gather",)
    assert tables.non_float_shared_consts == ("int_table",)


def test_tied_table_is_quantized_plain_and_int_tables_are_not(caplog):
    caplog.set_level("INFO", logger="lowerkit.coreml_preprocess.embeddings")
    program = _quantize(_program(), quantize_embedding_tables=False)
    assert _table_source(program, "nested_gather_a") == "constexpr_blockwise_shift_scale"
    assert _table_source(program, "plain_gather") == "const"
    assert _table_source(program, "int_gather") == "const"
    assert "nested_gather_a" in caplog.text and "nested_gather_b" in caplog.text


def test_quantize_embedding_tables_quantizes_every_float_table():
    program = _quantize(_program(), quantize_embedding_tables=True)
    assert _table_source(program, "nested_gather_a") == "constexpr_blockwise_shift_scale"
    assert _table_source(program, "plain_gather") == "constexpr_blockwise_shift_scale"
    assert _table_source(program, "int_gather") == "const"


def test_top_level_only_naming_would_conflict():
    """ExecuTorch 1.5.1 looks at top-level ops only: here it would miss the nested gathers."""
    program = copy.deepcopy(_program())
    config = cto.coreml.OptimizationConfig(global_config=INT8, op_type_configs={"gather": None})
    quantizer = PASS_REGISTRY["compression::linear_quantize_weights"]
    quantizer.config = config
    with pytest.raises(ValueError, match="conflict"):
        quantizer(program)
