"""LoweredProgram: what every backend's lowering result answers the same way (no torch import).

``arm_passes.lowering.ArmLowering`` and ``coreml_preprocess.lowering.CoreMLLowering`` are frozen
dataclasses with a ``pte`` (the serialized program) and ``cpu_ops`` (the operators left on the
CPU); they take their digest, delegation check and atomic save from here.
"""

from __future__ import annotations

import hashlib
import os
from pathlib import Path

from lowerkit.pass_infra.helpers.files import write_bytes_atomically

__all__ = ["LoweredProgram"]


class LoweredProgram:
    """A mixin for a lowering result with ``pte`` bytes and ``cpu_ops``; declares no fields."""

    pte: bytes
    cpu_ops: tuple[str, ...]

    @property
    def pte_sha256(self) -> str:
        """sha256 of the .pte bytes."""
        return hashlib.sha256(self.pte).hexdigest()

    @property
    def fully_delegated(self) -> bool:
        """True when no operator stayed on the CPU."""
        return not self.cpu_ops

    def save(self, path: str | os.PathLike[str]) -> Path:
        """Write the .pte atomically (temp file + rename), creating its folder; return the path."""
        target = Path(path)
        target.parent.mkdir(parents=True, exist_ok=True)
        return write_bytes_atomically(target, self.pte)
