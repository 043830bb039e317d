"""The library versions lowerkit-arm-passes was proven on (same TOSA / .pte bytes as stock)."""

from __future__ import annotations

from collections.abc import Mapping

from lowerkit.pass_infra.accelerations.versions import proven

__all__ = ["PROVEN_ON", "accelerated_ok"]

#: torch / ExecuTorch (the Arm passes, ArmPassManager, TOSABackend) and torchao (pt2e
#: quantization in lower_to_arm) this package's sameness with stock was proven on.
PROVEN_ON: Mapping[str, str] = {"torch": "2.13.0", "executorch": "1.5.1", "torchao": "0.18.0"}


def accelerated_ok(what: str) -> bool:
    """Whether the accelerated path `what` may run (else warn once and run the stock one)."""
    return proven("lowerkit-arm-passes", PROVEN_ON, what)
