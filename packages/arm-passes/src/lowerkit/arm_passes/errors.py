"""Errors a user of lowerkit.arm_passes can cause."""

from __future__ import annotations

__all__ = ["ArmLoweringError", "UnknownArmTargetError"]


class ArmLoweringError(ValueError):
    """The model or its inputs cannot be lowered as asked; the message says what to change."""


class UnknownArmTargetError(ArmLoweringError):
    """The target name is not one lowerkit lowers to; the message lists the valid ones."""
