"""Arm --verify: run the TOSA flatbuffers on tosa-tools' reference model and compare with torch."""

from __future__ import annotations

from typing import Any

from lowerkit.cli.result import Lowered
from lowerkit.cli.sources.model import ModelSource


def verify_arm(lowered: Lowered, source: ModelSource) -> dict[str, Any]:
    """Run the TOSA flatbuffers on tosa-tools' reference model and compare with torch."""
    from lowerkit.arm_passes.reference import verify_on_reference_model

    check = verify_on_reference_model(lowered.reference, source.example_inputs)
    result: dict[str, Any] = {
        "compared": check.compared,
        "max_abs_error": check.max_abs_error,
        "sqnr_db": check.sqnr_db,
    }
    if check.max_error_quanta is not None:
        result["max_error_quanta"] = check.max_error_quanta
    return result
