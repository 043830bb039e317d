"""Everything a user chose for one lowering, in one value: the target and the settings.

`lowering.lower` takes a `LowerOptions`; every setting that can change the output bytes is a
field here (and nowhere else), so that whatever keys a lowering (the cache, reports) can cover
all of them by walking the fields. Fields marked `OUTPUT` name where to write an extra output:
what keys a lowering counts whether they are asked for, not where they go.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path


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
    """The target and the settings of one lowering."""

    target: Target
    #: A .pt file or folder of saved input tensors (targets that calibrate).
    calibration_path: Path | None = None
    #: Core ML MIL pass names replacing the default pipeline (Core ML targets).
    pass_names: tuple[str, ...] | None = None
    #: Check the result against the float model.
    verify: bool = False
    #: A TOML compression recipe (global + per-layer rules) for `coreml` / `coreml-fp32`.
    recipe: Path | None = None
    #: Core ML enumerated input shapes: ((input name, (shape, shape, ...)), ...).
    shapes: tuple[tuple[str, tuple[tuple[int, ...], ...]], ...] | None = None
    #: Ethos-U: Vela system config and memory mode (None: ExecuTorch's defaults for the target)
    #: and Vela config file (None: Vela's Arm/vela.ini).
    system_config: str | None = None
    memory_mode: str | None = None
    vela_config: Path | None = None
    #: Quantize activations to int16, weights to int8 (Ethos-U; implied by tosa-int16).
    a16w8: bool = False
    #: Also write a bundled program (.bpte: inputs and reference outputs) / an ETRecord here.
    bundle_path: Path | None = field(default=None, metadata=OUTPUT)
    etrecord_path: Path | None = field(default=None, metadata=OUTPUT)
    #: Ethos-U: fail, writing nothing, when Vela's SRAM / flash use passes these (bytes).
    sram_budget: int | None = None
    flash_budget: int | None = None
    #: Modules the quantizer leaves in float (targets that calibrate); () changes nothing.
    keep_float: tuple[str, ...] = ()
