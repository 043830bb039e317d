"""lowerkit's Arm lowering gives the same TOSA flatbuffers and .pte bytes as stock ExecuTorch.

Both run here, now, on the same model and calibration batches; nothing is compared with
bytes recorded on another machine (calibration's float kernels differ per CPU).
"""

from __future__ import annotations

import pytest

from arm.conftest import CI_MODEL, cpu_rerun, lowered
from golden.arm import arm_models, fingerprint, lowering_case

#: The first four targets on the smallest CNN (every other target family: tests/arm_targets);
#: TOSA INT on every Arm zoo CNN.
CASES = [(CI_MODEL, t) for t in ("TOSA-1.0+INT", "TOSA-1.0+FP", "ethos-u55-128", "ethos-u85-256")] + [
    (m, "TOSA-1.0+INT") for m in arm_models() if m != CI_MODEL
]
#: Also run on torch's scalar kernels (why these: arm/conftest.py, ``cpu_rerun``).
SCALAR_RERUN = {(CI_MODEL, "TOSA-1.0+INT"), ("resnet8", "TOSA-1.0+INT")}


@pytest.mark.parametrize(
    ("model", "target"),
    [pytest.param(*case, marks=[cpu_rerun] if case in SCALAR_RERUN else []) for case in CASES],
    ids=lambda v: str(v),
)
def test_lowerkit_equals_live_stock(model: str, target: str) -> None:
    stock = lowered(model, target, stock=True)
    fast = lowered(model, target)
    assert stock.tosa_flatbuffers and stock.pte
    assert fast.tosa_flatbuffers == stock.tosa_flatbuffers
    assert fast.vela_binaries == stock.vela_binaries
    assert fast.pte == stock.pte
    assert fingerprint(fast) == fingerprint(stock)
    assert fast.report is not None and stock.report is None
    ran = sum(r.ran for r in fast.report.rows)
    assert 0 < ran < len(fast.report.rows)


def test_stock_is_deterministic_within_a_process() -> None:
    """A second stock lowering of the same case gives the same bytes (no hidden state)."""
    first = lowered(CI_MODEL, "TOSA-1.0+INT", stock=True)
    again = lowering_case(CI_MODEL, "TOSA-1.0+INT", stock=True)
    assert fingerprint(again) == fingerprint(first)


@cpu_rerun
def test_runs_on_the_cpu_capability_asked_for() -> None:
    """tests/BUILD's scalar_cpu variant really runs torch's scalar kernels."""
    import os

    import torch

    from arm.conftest import CPU_RERUN

    asked = os.environ.get("ATEN_CPU_CAPABILITY")
    if os.environ.get(CPU_RERUN) == "1":
        assert asked == "default", "the scalar rerun must run torch's scalar kernels"
    if asked:
        assert torch.backends.cpu.get_cpu_capability().lower() == asked.lower()
    else:
        assert torch.backends.cpu.get_cpu_capability() != ""
