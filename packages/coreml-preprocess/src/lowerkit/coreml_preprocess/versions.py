"""The library versions lowerkit-coreml-preprocess was proven on (same Core ML models as stock)."""

from __future__ import annotations

from collections.abc import Mapping

from lowerkit.pass_infra.accelerations.versions import proven

__all__ = ["PROVEN_ON", "accelerated_ok"]

#: torch / ExecuTorch (edge programs, the Core ML backend it mirrors) and coremltools (the
#: MIL pass pipeline `faster_conversion` replaces) this package was proven on.
PROVEN_ON: Mapping[str, str] = {"torch": "2.13.0", "executorch": "1.5.1", "coremltools": "9.0"}


def accelerated_ok(what: str) -> bool:
    """Whether the accelerated path `what` may run (else warn once and run the stock one)."""
    return proven("lowerkit-coreml-preprocess", PROVEN_ON, what)
