"""One lowering, whatever the backend: calibrate, lower, verify; errors become one line."""

from __future__ import annotations

import os
from typing import Any

from lowerkit.cli import calibration
from lowerkit.cli.errors import CliError, LoweringError
from lowerkit.cli.model_source import ModelSource
from lowerkit.cli.options import LowerOptions
from lowerkit.cli.progress import Steps
from lowerkit.cli.result import Lowered


def lower(source: ModelSource, options: LowerOptions, *, steps: Steps) -> Lowered:
    """Lower `source` as `options` say; any failure past the user's input becomes a LoweringError."""
    target = options.target
    pass_names = list(options.pass_names) if options.pass_names is not None else None
    warnings: list[str] = list(source.notes)
    batches = calibration.load(options.calibration_path, source, warn=warnings) if target.calibrates else []
    try:
        # Import only the target's backend: an Arm lowering never loads coremltools, a Core ML
        # lowering never loads the Arm stack (TOSA, Vela).
        if target.backend == "arm":
            from lowerkit.cli import arm

            lowered = arm.lower(source, options, calibration=batches, steps=steps)
        else:
            from lowerkit.cli import coreml

            lowered = coreml.lower(
                source, target, calibration=batches, pass_names=pass_names, steps=steps, recipe=options.recipe,
                shapes=dict(options.shapes) if options.shapes is not None else None,
                keep_float=options.keep_float,
            )
        lowered.warnings[:0] = warnings
        if options.verify:
            with steps.step("verify"):
                lowered.verification = _verify(lowered, source)
    except CliError:
        raise
    except Exception as error:
        raise as_lowering_error(error, f"lowering {source.name} to {target.name}") from error
    return lowered


def _verify(lowered: Lowered, source: ModelSource) -> dict[str, Any]:
    from lowerkit.cli import verify

    if lowered.target.backend == "arm":
        return verify.verify_arm(lowered, source)
    return verify.verify_coreml(lowered, source)


def as_lowering_error(error: Exception, what: str) -> Exception:
    if os.environ.get("LOWERKIT_DEBUG"):
        return error
    text = str(error).strip()
    detail = text.splitlines()[0] if text else "no detail"
    return LoweringError(
        f"{what} failed: {type(error).__name__}: {detail} (set LOWERKIT_DEBUG=1 for the traceback)"
    )
