"""lowerkit's Arm lowering gives the same delegate payloads and .pte bytes as stock ExecuTorch.

Stock is ExecuTorch's public API only (golden.arm.stock_case: the Arm quantizer, partitioner,
``to_edge_transform_and_lower``, ``to_executorch``); lowerkit is ``lower_to_arm``. Both run here,
now, on the same model and calibration batches; nothing is compared with bytes recorded on
another machine (calibration's float kernels differ per CPU).
"""

from __future__ import annotations

import pytest

from arm.conftest import CI_MODEL, cpu_rerun, lowered, stock_lowered
from golden.arm import arm_models, as_lowered, fingerprint, stock_case

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
    stock = stock_lowered(model, target)
    fast = lowered(model, target)
    assert stock.payloads and stock.pte
    # TOSA flatbuffers (Ethos-U: the Vela binaries compiled from them)
    assert as_lowered(fast).payloads == stock.payloads
    assert fast.pte == stock.pte
    assert fast.report is not None
    ran = sum(r.ran for r in fast.report.rows)
    assert 0 < ran < len(fast.report.rows)


def test_stock_is_deterministic_within_a_process() -> None:
    """A second stock lowering of the same case gives the same bytes (no hidden state)."""
    first = stock_lowered(CI_MODEL, "TOSA-1.0+INT")
    again = stock_case(CI_MODEL, "TOSA-1.0+INT")
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
