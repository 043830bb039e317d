"""lowerkit's Arm lowering gives the same TOSA flatbuffers and .pte bytes as stock ExecuTorch."""

from __future__ import annotations

import pytest

from arm.conftest import CI_MODEL, goldens, lowered
from golden.arm import fingerprint
from lowerkit.arm_passes import ARM_TARGETS


def test_live_side_by_side_stock_vs_lowerkit() -> None:
    """Stock ExecuTorch and lowerkit run here, now, on the same model: same bytes."""
    stock = lowered(CI_MODEL, "TOSA-1.0+INT", stock=True)
    fast = lowered(CI_MODEL, "TOSA-1.0+INT")
    assert stock.tosa_flatbuffers and stock.pte
    assert fast.tosa_flatbuffers == stock.tosa_flatbuffers
    assert fast.pte == stock.pte
    assert fast.report is not None and stock.report is None
    ran = sum(r.ran for r in fast.report.rows)
    assert 0 < ran < len(fast.report.rows)


def test_stock_reproduces_its_golden() -> None:
    """Stock lowering is deterministic across processes: today's bytes equal the recorded ones."""
    stock = lowered(CI_MODEL, "TOSA-1.0+INT", stock=True)
    assert fingerprint(stock) == goldens()[f"{CI_MODEL}/TOSA-1.0+INT"]


@pytest.mark.parametrize("target", ARM_TARGETS)
def test_lowerkit_equals_stock_golden(target: str) -> None:
    fast = lowered(CI_MODEL, target)
    assert fingerprint(fast) == goldens()[f"{CI_MODEL}/{target}"]


def test_goldens_cover_the_zoo_matrix() -> None:
    from golden.arm import arm_models

    cases = goldens()
    for model in arm_models():
        for target in ARM_TARGETS:
            assert f"{model}/{target}" in cases, f"no golden for {model}/{target}; run python -m golden.arm"
