"""What a lowering produces, whatever the backend."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from lowerkit.cli.options import Target


@dataclass
class Lowered:
    """A lowered program and what is worth reporting about it."""

    model: str
    target: Target
    pte: bytes
    #: Wall seconds per step.
    seconds: dict[str, float] = field(default_factory=dict)
    #: Per-pass profile rows of the backend pass pipeline, where there is one.
    passes: list[dict[str, Any]] = field(default_factory=list)
    #: Ops left on the CPU (not delegated).
    cpu_ops: list[str] = field(default_factory=list)
    #: Warnings for the user.
    warnings: list[str] = field(default_factory=list)
    #: The backend library's result (ArmLowering / CoreMLLowering), for --verify.
    reference: Any = field(default=None, repr=False)
    #: Verification results (--verify).
    verification: dict[str, Any] = field(default_factory=dict)
    #: The backend's own fields of the `--report` JSON (JSON-ready; Arm: TOSA sizes, the NPU report).
    report: dict[str, Any] = field(default_factory=dict)
    #: The backend's extra files by name (Arm: "bundle", "etrecord", "tosa/partition0.tosa").
    extras: dict[str, bytes] = field(default_factory=dict, repr=False)
    #: How the lowering cache served it: "hit", "miss" or "off".
    cache: str = "off"

