"""One lowering, whatever the backend: calibrate, lower, verify; errors become one line."""

from __future__ import annotations

import os

from lowerkit.cli import calibration
from lowerkit.cli.errors import CliError, LoweringError
from lowerkit.cli.options import LowerOptions
from lowerkit.cli.progress import Steps
from lowerkit.cli.result import Lowered
from lowerkit.cli.sources.model import ModelSource
from lowerkit.cli.targets import backend_of


def lower(source: ModelSource, options: LowerOptions, *, steps: Steps) -> Lowered:
    """Lower `source` as `options` say; any failure past the user's input becomes a LoweringError."""
    target = options.target
    backend = backend_of(target)
    warnings: list[str] = list(source.notes)
    batches = calibration.load(options.calibration_path, source, warn=warnings) if target.calibrates else []
    try:
        # The backend imports its own library only: an Arm lowering never loads coremltools, a
        # Core ML lowering never loads the Arm stack (TOSA, Vela).
        lowered = backend.lower(source, options, calibration=batches, steps=steps)
        lowered.warnings[:0] = warnings
        if options.verify:
            with steps.step("verify"):
                lowered.verification = backend.verify(lowered, source)
    except CliError:
        raise
    except Exception as error:
        raise as_lowering_error(error, f"lowering {source.name} to {target.name}") from error
    return lowered


def as_lowering_error(error: Exception, what: str) -> Exception:
    """`error` as one line naming `what` failed (a LoweringError), or itself under LOWERKIT_DEBUG=1."""
    if os.environ.get("LOWERKIT_DEBUG"):
        return error
    text = str(error).strip()
    detail = text.splitlines()[0] if text else "no detail"
    return LoweringError(
        f"{what} failed: {type(error).__name__}: {detail} (set LOWERKIT_DEBUG=1 for the traceback)"
    )
