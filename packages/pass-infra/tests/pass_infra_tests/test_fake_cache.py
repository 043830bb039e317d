"""faketensor_cache: ExecuTorch namespaces cached inside, global state exactly restored."""

from __future__ import annotations

import pytest
import torch
from torch._subclasses.fake_tensor import FakeTensorMode

from lowerkit.pass_infra import PassInfraError, faketensor_cache
from lowerkit.pass_infra._upstream import bypass_entry_type, cache_key_func, fake_state_snapshot

QUANT = torch.ops.quantized_decomposed.quantize_per_tensor.default


_INPUTS: dict[int, tuple[FakeTensorMode, torch.Tensor]] = {}


def _quantize(mode: FakeTensorMode) -> torch.Tensor:
    """One quantize_per_tensor dispatch (and nothing else) in `mode`."""
    if id(mode) not in _INPUTS:  # the mode is kept alive with its input
        _INPUTS[id(mode)] = (mode, mode.from_tensor(torch.zeros(4, 8)))
    x = _INPUTS[id(mode)][1]
    with mode:
        return QUANT(x, 0.1, 3, -128, 127, torch.int8)


def _entries_for(op) -> list:
    return [e for k, e in FakeTensorMode.cache.items() if cache_key_func(k) is op]


def test_stock_does_not_cache_quantized_decomposed():
    mode = FakeTensorMode()
    _quantize(mode)
    entries = _entries_for(QUANT)
    assert entries and all(_is_bypass(e) for e in entries)


def test_inside_the_scope_the_op_is_cached_and_hits():
    mode = FakeTensorMode()
    _quantize(mode)  # leaves stock's negative entry behind
    with faketensor_cache(["quantized_decomposed"]):
        first = _quantize(mode)
        hits = FakeTensorMode.cache_hits
        second = _quantize(mode)
        assert FakeTensorMode.cache_hits == hits + 1
        assert any(not _is_bypass(e) for e in _entries_for(QUANT))
    assert (second.shape, second.dtype, second.stride()) == (
        first.shape,
        first.dtype,
        first.stride(),
    )


def test_global_state_is_restored_exactly_on_exit_and_on_exception():
    mode = FakeTensorMode()
    _quantize(mode)
    before = fake_state_snapshot()
    with faketensor_cache():
        _quantize(mode)
        _quantize(mode)
        assert fake_state_snapshot() != before
    after = fake_state_snapshot()
    assert after.keys() == before.keys()
    for key in before:
        if key == "cache":
            assert after["cache"].keys() == before["cache"].keys()
            assert all(after["cache"][k] is v for k, v in before["cache"].items())
        else:
            assert after[key] is before[key]
    with pytest.raises(ValueError, match="inside"), faketensor_cache():
        _quantize(mode)
        raise ValueError("inside")
    again = fake_state_snapshot()
    assert again["cache"].keys() == before["cache"].keys()
    assert all(again[k] is before[k] for k in before if k != "cache")
    # And stock behaviour is back: the op is not cached outside the scope.
    hits = FakeTensorMode.cache_hits
    _quantize(mode)
    assert FakeTensorMode.cache_hits == hits


def test_bad_namespaces_are_user_errors():
    with pytest.raises(PassInfraError, match="collection"), faketensor_cache("tosa"):
        pass
    with pytest.raises(PassInfraError, match="already"), faketensor_cache(["aten"]):
        pass


def _is_bypass(entry: object) -> bool:
    return isinstance(entry, bypass_entry_type)
