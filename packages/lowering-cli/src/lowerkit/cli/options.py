"""Everything a user chose for one lowering, in one value: the target and the settings.

`lowering.lower` takes a `LowerOptions`; every setting that can change the output bytes is a
field here or of its backend's `settings` (and nowhere else), so that whatever keys a lowering
(the cache, reports) can cover all of them by walking the fields. Fields marked `OUTPUT` name
where to write an extra output: what keys a lowering counts whether they are asked for, not
where they go.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any


@dataclass(frozen=True)
class Target:
    """One `-t/--target` value (the backends declare them: `targets.TARGETS` lists them all).

    Its fields are part of every cache key (`cache.key.options_fingerprint`): adding, renaming
    or reordering one invalidates users' caches.
    """

    name: str
    #: The backend family that lowers it: `backend.Backend.family` ("coreml" or "arm").
    backend: str
    summary: str
    #: Whether the target quantizes with calibration data.
    calibrates: bool = False


#: Field metadata of an output location (its presence matters to the lowering, not its path).
OUTPUT = {"output": True}


@dataclass(frozen=True)
class LowerOptions:
    """The target and the settings of one lowering: those of every backend, and the target's backend's own."""

    target: Target
    #: A .pt file or folder of saved input tensors (targets that calibrate).
    calibration_path: Path | None = None
    #: Check the result against the float model.
    verify: bool = False
    #: Modules the quantizer leaves in float (targets that calibrate); () changes nothing.
    keep_float: tuple[str, ...] = ()
    #: The target's backend's settings (a frozen dataclass: its `Backend.settings_type`, whose
    #: fields may be marked `OUTPUT`); None: its defaults.
    settings: Any = None
