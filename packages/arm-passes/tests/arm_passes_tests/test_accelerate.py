"""accelerated_arm_pipeline makes ExecuTorch's own lowering use the fast pipeline, with the same bytes."""

from __future__ import annotations

from typing import Any

import pytest
from executorch.exir import to_edge_transform_and_lower

from lowerkit.arm_passes import (
    FastArmPassManager,
    _upstream,
    accelerated_arm_pipeline,
    arm_pipeline_passes,
    compile_spec_for,
    lower_to_arm,
)
from lowerkit.arm_passes.devices import partitioner_for


def _lower(program: Any, target: str) -> tuple[bytes, list[bytes]]:
    flatbuffers: list[bytes] = []
    with _upstream.capture_tosa_flatbuffers(flatbuffers):
        edge = to_edge_transform_and_lower(program, partitioner=[partitioner_for(compile_spec_for(target))])
        pte = bytes(edge.to_executorch().buffer)
    return pte, flatbuffers


def test_stock_script_gets_fast_pipeline_and_same_bytes(permute_net: Any) -> None:
    import torch

    model, example, _ = permute_net
    program = torch.export.export(model, example)
    stock_pte, stock_tosa = _lower(program, "TOSA-1.0+FP")
    with accelerated_arm_pipeline() as reports:
        fast_pte, fast_tosa = _lower(torch.export.export(model, example), "TOSA-1.0+FP")
    assert len(reports) == 1
    names = [r.name for r in reports[0].rows]
    expected = [type(p).__name__ for p in arm_pipeline_passes("TOSA-1.0+FP")]
    assert [n.removeprefix("Incremental") for n in names] == expected
    assert fast_tosa == stock_tosa and fast_pte == stock_pte


def test_patch_is_restored_even_after_an_error() -> None:
    from executorch.backends.arm import _passes

    before = _passes.ArmPassManager
    with pytest.raises(RuntimeError), accelerated_arm_pipeline():
        assert _passes.ArmPassManager is not before
        built = _passes.ArmPassManager(compile_spec_for("TOSA-1.0+FP"))
        assert isinstance(built, FastArmPassManager)
        raise RuntimeError("boom")
    assert _passes.ArmPassManager is before


@pytest.mark.parametrize("target", ["TOSA-1.0+INT"])
def test_verify_mode_and_lower_to_arm_match_stock(permute_net: Any, target: str) -> None:
    model, example, calibration = permute_net
    stock = lower_to_arm(model, example, target, calibration=calibration, stock=True)
    fast = lower_to_arm(model, example, target, calibration=calibration, verify=True)
    assert fast.pte == stock.pte
    assert fast.tosa_flatbuffers == stock.tosa_flatbuffers
    assert fast.report is not None
    ran = [r for r in fast.report.rows if r.ran]
    assert 0 < len(ran) < len(fast.report.rows)
