"""Shared, cached lowerings of the CI model for the Arm cross-package tests (each lowering costs seconds)."""

from __future__ import annotations

import json
from functools import cache
from pathlib import Path
from typing import Any

from golden.arm import lowering_case

GOLDENS = Path(__file__).parent / "goldens" / "arm_stock.json"
#: The smallest Arm zoo CNN: lowered for every target in CI; the others via tools/golden/arm.py --check.
CI_MODEL = "ds_cnn"


@cache
def lowered(model: str, target: str, stock: bool = False) -> Any:
    """lower_to_arm of a zoo model, as the goldens were recorded (cached per session)."""
    return lowering_case(model, target, stock=stock)


@cache
def goldens() -> dict[str, Any]:
    """The recorded stock sha256s, keyed "model/target"."""
    return json.loads(GOLDENS.read_text())["cases"]  # type: ignore[no-any-return,unused-ignore]
