"""faster_conversion's replacements give coremltools' own answers (the whole conversion is compared
with the stock one in test_lowering.test_faster_conversion_gives_the_stock_result)."""

from __future__ import annotations

import logging
import warnings
from typing import Any

import coremltools as ct
import numpy as np
import pytest
from coremltools.converters.mil import Builder as mb
from coremltools.converters.mil.mil import types
from coremltools.converters.mil.mil.block import Function
from coremltools.converters.mil.mil.passes.defs.quantization import FP16ComputePrecision
from coremltools.converters.mil.mil.passes.pass_registry import PASS_REGISTRY
from coremltools.converters.mil.mil.scope import ScopeSource

from lowerkit.coreml_preprocess import _upstream_faster_conversion

#: fp32 constants around coremltools' two bounds (65504, the fp16 maximum; 1e38, "an infinity").
CONSTANTS = [
    np.ones((3, 4), dtype=np.float32),
    np.array([1.0, -65504.0, 65504.0], dtype=np.float32),
    np.array([1.0, 65505.0], dtype=np.float32),
    np.array([-7e4, 2.0], dtype=np.float32),
    np.array([0.5, -np.inf, np.inf], dtype=np.float32),
    np.array([np.inf, 7e4], dtype=np.float32),
    np.array([np.float32(1e38), 3.0], dtype=np.float32),
    np.array([np.nan, 1.0], dtype=np.float32),
    np.array([np.nan, 1e5], dtype=np.float32),
    np.float32(7e4),
    np.float32(3.0),
]


def _ops_reading(constants: list[Any]) -> list[Any]:
    @mb.program(input_specs=[mb.TensorSpec(shape=(1,), dtype=types.fp32)], opset_version=ct.target.iOS16)
    def prog(x: Any) -> Any:
        outs = [mb.add(x=x, y=mb.const(val=c)) for c in constants]
        return mb.concat(values=[mb.reshape(x=o, shape=[-1]) for o in outs], axis=0)

    return [op for op in prog.functions["main"].operations if op.op_type == "add"]


def test_fp16_overflow_bounded_first_agrees_with_coremltools() -> None:
    stock = FP16ComputePrecision.__dict__["fp16_overflow"].__func__
    ops = _ops_reading(CONSTANTS)
    answers = [stock(op) for op in ops]
    assert answers == [_upstream_faster_conversion.fp16_overflow_bounded_first(stock)(op) for op in ops]
    assert answers == [False, False, True, True, False, True, False, False, True, True, False]


TYPES = [
    None,
    types.fp32,
    types.int32,
    types.str,
    types.bool,
    types.tensor(types.fp32, (2, 3)),
    types.tensor(types.int32, ()),
    types.list(types.fp32),
    types.tuple((types.fp32, types.int32)),
    types.dict(types.str, types.int32),
    types.state(types.tensor(types.fp16, (4,))),
    types.tensor(types.fp32, (2, 3))(),  # an instance, not a class
    float,
]


@pytest.mark.parametrize("key", list(_upstream_faster_conversion._TYPE_PREDICATES))
def test_memoized_type_predicates_agree_and_are_removed(key: tuple[str, str]) -> None:
    import importlib

    module, name = key
    stock = getattr(importlib.import_module(module), name)
    expected = [stock(t) for t in TYPES]
    with _upstream_faster_conversion.faster_conversion():
        replaced = getattr(types, name)
        assert replaced is not stock
        assert [replaced(t) for t in TYPES] == expected
        assert [replaced(t) for t in TYPES] == expected  # from the memo now
        assert _upstream_faster_conversion._PREDICATE_RESULTS
    assert getattr(types, name) is stock
    assert getattr(importlib.import_module(module), name) is stock
    assert not _upstream_faster_conversion._PREDICATE_RESULTS


def _transposed_program() -> Any:
    @mb.program(input_specs=[mb.TensorSpec(shape=(1, 2, 3), dtype=types.fp32)], opset_version=ct.target.iOS16)
    def prog(x: Any) -> Any:
        y = mb.transpose(x=x, perm=[0, 2, 1])
        return mb.transpose(x=mb.relu(x=y), perm=[0, 2, 1])

    return prog


def test_function_text_still_formatted_where_logged() -> None:
    records: list[str] = []

    class Keep(logging.Handler):
        def emit(self, record: logging.LogRecord) -> None:
            records.append(record.getMessage())

    prog = _transposed_program()
    text = str(prog.functions["main"])
    logger = logging.getLogger("coremltools")
    handler, level = Keep(level=logging.DEBUG), logger.level
    logger.addHandler(handler)
    logger.setLevel(logging.DEBUG)
    try:
        with _upstream_faster_conversion.faster_conversion():
            assert str(prog.functions["main"]) == text  # not from a debug-message site
            PASS_REGISTRY["common::reduce_transposes"](prog)
    finally:
        logger.removeHandler(handler)
        logger.setLevel(level)
    before = [r for r in records if r.startswith("Block before optimize transpose transform:\n")]
    assert len(before) == 1 and "function[CoreML6](%x: (1, 2, 3, fp32)(Tensor))" in before[0]
    assert Function.__dict__["__str__"].__module__ == Function.__module__


def _scoped_program(with_scope: bool) -> Any:
    @mb.program(input_specs=[mb.TensorSpec(shape=(2,), dtype=types.fp32)], opset_version=ct.target.iOS16)
    def prog(x: Any) -> Any:
        return mb.relu(x=x)

    function = prog.functions["main"]
    function._add_essential_scope_source(ScopeSource.EXIR_DEBUG_HANDLE)
    if with_scope:
        for op in function.operations:
            op.scopes[ScopeSource.EXIR_DEBUG_HANDLE] = [1]
    return prog


def test_essential_scope_check_is_coremltools_own() -> None:
    _upstream_faster_conversion.check_essential_scope(_scoped_program(with_scope=True))
    missing = _scoped_program(with_scope=False)
    with pytest.raises(ValueError, match="missing essential scopes") as stock:
        missing.validate(check_essential_scope=True)
    with pytest.raises(ValueError, match="missing essential scopes") as ours:
        _upstream_faster_conversion.check_essential_scope(missing)
    assert str(ours.value) == str(stock.value)


class _Value:
    def __init__(self, val: Any) -> None:
        self.val = val


class _Var:
    """What ``_check_underflow_to_zero`` reads and writes of a MIL var."""

    def __init__(self, val: Any) -> None:
        self._sym_val = _Value(val)

    @property
    def val(self) -> Any:
        return self._sym_val.val


def _underflow_cases() -> list[Any]:
    rng = np.random.default_rng(0)
    tiny = np.array([0.0, -0.0, 1e-8, -1e-8, 3e-8, -3e-8, 6e-8, 1e-7, -1e-7, 1e-45, np.nan, np.inf, 1.0])
    return [
        tiny.astype(np.float32),
        tiny.astype(np.float32).reshape(13, 1),
        (rng.standard_normal((4, 5)) * 1e-7).astype(np.float32),
        (rng.standard_normal(399) * 1e-7).astype(np.float32),
        (rng.standard_normal(400) * 1e-7).astype(np.float32),
        rng.standard_normal((3, 3)).astype(np.float32),
        np.float32(1e-8),
        np.float32(-1e-9),
        np.float32(0.0),
        np.float32(2.0),
        np.array([1e-8, 0.0]),  # fp64: upstream's own function
    ]


def test_underflow_check_at_once_agrees_with_coremltools() -> None:
    from coremltools.converters.mil.mil.passes.defs.quantization import add_fp16_cast

    stock = FP16ComputePrecision.__dict__["_check_underflow_to_zero"]
    ours = _upstream_faster_conversion._underflow_check_at_once(stock)
    changed = 0
    for value in _underflow_cases():
        cast = np.asarray(value).astype(np.float16)
        cast = cast[()] if np.ndim(value) == 0 else cast
        expected, got = _Var(cast.copy() if np.ndim(cast) else cast), _Var(cast.copy() if np.ndim(cast) else cast)
        stock(add_fp16_cast(), expected, _Var(value))
        ours(add_fp16_cast(), got, _Var(value))
        assert type(got.val) is type(expected.val)
        np.testing.assert_array_equal(got.val, expected.val)
        assert np.asarray(got.val).dtype == np.asarray(expected.val).dtype
        changed += not np.array_equal(expected.val, cast, equal_nan=True)
    assert changed >= 4  # subnormal fp32 values that fp16 rounds to zero were set to +-2**-24


class _Cycle:
    """A reference cycle: only a garbage collection frees it."""

    def __init__(self) -> None:
        self.me = self


def _cycle_freed_by_convert_collect() -> bool:
    import weakref

    cycle = _Cycle()
    alive = weakref.ref(cycle)
    del cycle
    _upstream_faster_conversion._converters_entry().gc.collect()
    return alive() is None


def test_conversion_collects_garbage_on_a_frozen_heap_only() -> None:
    """Inside FASTER_CONVERSION, ``ct.convert``'s final collection is skipped on an unfrozen heap
    (a walk of the whole process) and runs on a frozen one (a walk of what is new: the
    conversion's garbage is freed, as upstream)."""
    import gc

    from lowerkit.pass_infra.accelerations.settled_heap import settled_heap

    gc.collect()
    with _upstream_faster_conversion.faster_conversion():
        assert gc.get_freeze_count() == 0
        assert not _cycle_freed_by_convert_collect()
        gc.collect()
        with settled_heap():
            assert gc.get_freeze_count() > 0
            assert _cycle_freed_by_convert_collect()
    assert _cycle_freed_by_convert_collect()  # outside the patch: coremltools' own gc


def _symmetric_cases() -> list[tuple[np.ndarray, Any]]:
    """(weight, reduced axes): every finite fp16 value under several channel maxima, fp32 blocks."""
    every = np.arange(1 << 16, dtype=np.uint16).view(np.float16)
    every = every[np.isfinite(every)]
    rows = []
    for bound in (65504.0, 1000.0, 7.0, 1.0, 0.01, 6e-5):
        row = every[np.abs(every) <= bound]
        rows.append(np.resize(row, every.size))  # repeated to one length: the same channel maximum
    rng = np.random.default_rng(0)
    blocks = rng.standard_normal((16, 4, 32)).astype(np.float32)
    return [
        (np.stack(rows), (1,)),
        (np.stack(rows).T.copy(), (0,)),
        (blocks, (2,)),
        (blocks, (0, 2)),
        (blocks.astype(np.float16), (1, 2)),
        (np.asarray(blocks[0], dtype=np.float16), 1),
    ]


def _same_quantization(got: tuple[Any, ...], expected: tuple[Any, ...]) -> None:
    for ours, theirs in zip(got, expected, strict=True):
        if theirs is None:
            assert ours is None
            continue
        assert ours.dtype == theirs.dtype and ours.shape == theirs.shape
        assert ours.tobytes() == theirs.tobytes()  # every bit, signed zeros included


@pytest.mark.parametrize("dtype", ["int4", "int8"])
def test_symmetric_quantization_in_torch_agrees_with_coremltools(dtype: str) -> None:
    utils = _upstream_faster_conversion._quantization_utils()
    stock = utils.quantize_weight_by_dtype
    ours = _upstream_faster_conversion.symmetric_quantization_in_torch(stock)
    for weight, axes in _symmetric_cases():
        expected = stock(weight, axes, types.string_to_builtin(dtype), "LINEAR_SYMMETRIC")
        _same_quantization(ours(weight, axes, types.string_to_builtin(dtype), "LINEAR_SYMMETRIC"), expected)


def test_symmetric_quantization_in_torch_leaves_the_rest_to_coremltools() -> None:
    """Unsigned types, the asymmetric mode, NaN, infinities, a zero channel, fp64, read-only
    weights: coremltools' own answers (the same arrays; no warning the stock way lacks)."""
    utils = _upstream_faster_conversion._quantization_utils()
    stock = utils.quantize_weight_by_dtype
    ours = _upstream_faster_conversion.symmetric_quantization_in_torch(stock)
    rng = np.random.default_rng(1)
    weight = rng.standard_normal((8, 16)).astype(np.float16)
    read_only = weight.copy()
    read_only.flags.writeable = False
    with_nan, with_inf, zero_row = weight.copy(), weight.copy(), weight.copy()
    with_nan[2, 3], with_inf[5, 1], zero_row[4] = np.nan, -np.inf, 0
    int8, uint8 = types.string_to_builtin("int8"), types.string_to_builtin("uint8")
    cases = [
        (weight, uint8, "LINEAR_SYMMETRIC"),
        (weight, int8, "LINEAR"),
        (weight.astype(np.float64), int8, "LINEAR_SYMMETRIC"),
        (read_only, int8, "LINEAR_SYMMETRIC"),
        (with_nan, int8, "LINEAR_SYMMETRIC"),
        (with_inf, int8, "LINEAR_SYMMETRIC"),
        (zero_row, int8, "LINEAR_SYMMETRIC"),
    ]
    for value, dtype, mode in cases:
        with warnings.catch_warnings(record=True) as theirs_raised:
            warnings.simplefilter("always")
            expected = stock(value, (1,), dtype, mode)
        with warnings.catch_warnings(record=True) as ours_raised:
            warnings.simplefilter("always")
            got = ours(value, (1,), dtype, mode)
        assert [str(w.message) for w in ours_raised] == [str(w.message) for w in theirs_raised]
        _same_quantization(got, expected)
