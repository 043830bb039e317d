"""Errors a user can cause, and partial delegation."""

from __future__ import annotations

from typing import Any

import pytest
import torch

from lowerkit.arm_passes import ARM_TARGETS, ArmLoweringError, UnknownArmTargetError, lower_to_arm


def test_unknown_target_names_the_valid_ones(permute_net: Any) -> None:
    model, example, _ = permute_net
    with pytest.raises(UnknownArmTargetError) as info:
        lower_to_arm(model, example, "ethos-u99")
    assert isinstance(info.value, ValueError)
    for target in ARM_TARGETS:
        assert target in str(info.value)


def test_bad_inputs_are_explained() -> None:
    with pytest.raises(ArmLoweringError, match="tuple of tensors"):
        lower_to_arm(torch.nn.ReLU(), "not a tensor", "TOSA-1.0+FP")  # type: ignore[arg-type]
    with pytest.raises(ArmLoweringError, match=r"torch\.nn\.Module"):
        lower_to_arm(object(), (torch.ones(1),), "TOSA-1.0+FP")  # type: ignore[arg-type,unused-ignore]


class _WithUnsupportedOp(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.linear = torch.nn.Linear(8, 8)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = torch.relu(self.linear(x))
        y = torch.topk(y, 3, dim=-1).values  # TOSA has no top-k
        return y * 2.0


def test_unsupported_op_stays_on_cpu_and_is_reported() -> None:
    model = _WithUnsupportedOp().eval()
    example = (torch.randn(2, 8),)
    unaccelerated = lower_to_arm(model, example, "TOSA-1.0+FP", stock=True)  # lowerkit's driver, stock pipeline
    fast = lower_to_arm(model, example, "TOSA-1.0+FP")
    assert not fast.fully_delegated
    assert any("topk" in op for op in fast.cpu_ops), fast.cpu_ops
    assert fast.tosa_flatbuffers, "the supported part is still delegated"
    assert fast.cpu_ops == unaccelerated.cpu_ops
    assert fast.pte == unaccelerated.pte and fast.tosa_flatbuffers == unaccelerated.tosa_flatbuffers
