"""Where stock ExecuTorch fails on a common decoder, lowerkit lowers it (a documented fix,
``lowerkit.arm_passes.upstream_fixes``), and only there.

GPT-2 (the corpus's ``hf:gpt2_2l``: 2 layers, dim 256, tied embeddings) to TOSA-1.0+INT: ExecuTorch's
public flow stops in the Arm quantizer's ``ReplaceScalarWithTensorByProfilePass`` (``'Parameter'
object has no attribute 'to_tensor'``); the same flow inside the drop-in scopes lowers it. (Stock
with only that fix gives the drop-in's bytes: checked when the fix was made, 8a662d3a… both, too
slow for CI.)
"""

from __future__ import annotations

from typing import Any

import pytest

from bench.corpus import load
from bench.realworld_flows import lower
from lowerkit.arm_passes import upstream_fixes

TARGET = "TOSA-1.0+INT"


def test_gpt2_fails_stock_and_lowers_in_the_drop_in_scopes() -> None:
    model = load("hf:gpt2_2l")
    with pytest.raises(Exception) as stock:
        lower("stock", model.module, model.example_inputs, TARGET, model.calibration)
    assert "'Parameter' object has no attribute 'to_tensor'" in str(stock.value.__cause__ or stock.value)
    fixed = lower("dropin", model.module, model.example_inputs, TARGET, model.calibration)
    assert fixed.pte and fixed.payloads


class _Proxy:
    """What ExportPass hands a pass for a graph value (a ProxyValue has ``to_tensor``)."""

    def to_tensor(self) -> Any:
        raise AssertionError("not reached: stock's get_replacement is called with it")


def test_the_fix_hands_every_other_call_to_stock(monkeypatch: pytest.MonkeyPatch) -> None:
    calls: list[tuple[Any, ...]] = []

    def stock(*args: Any) -> str:
        calls.append(args)
        return "stock"

    monkeypatch.setattr(upstream_fixes._upstream, "STOCK_GET_REPLACEMENT", stock)
    proxy = _Proxy()
    assert upstream_fixes.get_replacement(object(), "op", (proxy, 2.0), {}, None) == "stock"
    assert calls and calls[0][2] == (proxy, 2.0)
