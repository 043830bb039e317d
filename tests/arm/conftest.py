"""Shared, cached lowerings of the Arm zoo CNNs for the cross-package tests (each costs seconds).

The test files of tests/arm run in one process (see tests/BUILD), so each lowering is done once
for all of them.
"""

from __future__ import annotations

from functools import cache
from typing import Any

from golden.arm import lowering_case

#: The smallest Arm zoo CNN: lowered for every target in CI; the others for TOSA INT.
CI_MODEL = "ds_cnn"


@cache
def lowered(model: str, target: str, stock: bool = False) -> Any:
    """lower_to_arm of a zoo model, stock ExecuTorch's or lowerkit's (cached per process)."""
    return lowering_case(model, target, stock=stock)
