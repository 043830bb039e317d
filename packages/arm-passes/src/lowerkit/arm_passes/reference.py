"""Run produced TOSA flatbuffers on the TOSA reference model (tosa-tools) and compare with torch."""

from __future__ import annotations

import contextlib
import ctypes
import os
import sys
import tempfile
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch

from lowerkit.arm_passes.errors import ArmLoweringError
from lowerkit.arm_passes.lowering import ArmLowering
from lowerkit.pass_infra.numerics.sqnr import sqnr_db

__all__ = ["ReferenceCheck", "native_stdout_to_stderr", "run_tosa_reference", "verify_on_reference_model"]


@dataclass(frozen=True)
class ReferenceCheck:
    """Outcome of verify_on_reference_model: what was compared, max abs error and SQNR (dB).

    For INT targets also the largest error in output quanta (steps of the output's scale).
    """

    compared: str
    max_abs_error: float
    sqnr_db: float
    max_error_quanta: float | None = None


#: What the reference model prints on every run of a TOSA 1.0 flatbuffer: a notice, not a problem.
_BENIGN_NOTICE = "Different TOSA spec in flatbuffer and serializer versions detected"


@contextlib.contextmanager
def native_stdout_to_stderr() -> Iterator[None]:
    """Send what native code prints to stdout (file descriptor 1) to stderr, after the fact.

    The reference model prints to stdout, which would corrupt a caller's own output (e.g.
    `lowerkit lower --json`). Its output is collected in a temporary file and copied to
    stderr, without the version notice it prints on every run.
    """
    sys.stdout.flush()
    saved = os.dup(1)
    with tempfile.TemporaryFile() as captured:
        try:
            os.dup2(captured.fileno(), 1)
            yield
        finally:
            sys.stdout.flush()
            ctypes.CDLL(None).fflush(None)  # native code's buffered stdio output goes to the file too
            os.dup2(saved, 1)
            os.close(saved)
            captured.seek(0)
            text = captured.read().decode(errors="replace")
            kept = [line for line in text.splitlines() if line.strip() and _BENIGN_NOTICE not in line]
            if kept:
                print("\n".join(kept), file=sys.stderr, flush=True)


def run_tosa_reference(flatbuffer: bytes, inputs: Sequence[np.ndarray]) -> list[np.ndarray]:
    """Run one TOSA flatbuffer on the TOSA reference model; returns its outputs as numpy arrays."""
    import tosa_reference_model as reference_model  # type: ignore[import-untyped]

    with native_stdout_to_stderr():
        outputs, status = reference_model.run(
            flatbuffer, list(inputs), verbosity="LOW", initialize_variable_tensor_from_numpy=True
        )
    if status != reference_model.GraphStatus.TOSA_VALID:
        raise ArmLoweringError(f"the TOSA reference model rejected the flatbuffer (status {status})")
    return list(outputs)


def _flat(value: Any) -> list[torch.Tensor]:
    if isinstance(value, torch.Tensor):
        return [value]
    return [t for item in value for t in _flat(item)]


def verify_on_reference_model(
    lowering: ArmLowering, example_inputs: tuple[torch.Tensor, ...]
) -> ReferenceCheck:
    """Run the lowering's TOSA flatbuffer on the reference model and compare with torch.

    INT targets: inputs are quantized (int8, or int16 for a16w8) with the delegate's input qparams, outputs dequantized,
    and compared with the fake-quantized program run in torch. FP: compared with the float
    program. Needs one fully delegated partition.
    """
    if len(lowering.tosa_flatbuffers) != 1 or not lowering.fully_delegated:
        raise ArmLoweringError(
            f"reference-model verification needs one fully delegated partition; this lowering has "
            f"{len(lowering.tosa_flatbuffers)} partition(s) and CPU ops {list(lowering.cpu_ops)}"
        )
    if lowering.source_program is None:
        raise ArmLoweringError("this ArmLowering carries no source program to compare against")
    with torch.no_grad():
        expected = _flat(lowering.source_program.module()(*example_inputs))
    integer = bool(lowering.input_qparams)
    if integer:
        if len(lowering.input_qparams) != len(example_inputs):
            raise ArmLoweringError("the delegate's quantized inputs do not match the example inputs")
        low, high, dtype = (-32768, 32767, torch.int16) if lowering.a16w8 else (-128, 127, torch.int8)
        feeds = [
            torch.clamp(torch.round(x / scale) + zp, low, high).to(dtype).numpy()
            for x, (scale, zp) in zip(example_inputs, lowering.input_qparams, strict=True)
        ]
    else:
        feeds = [x.detach().numpy() for x in example_inputs]
    raw = run_tosa_reference(lowering.tosa_flatbuffers[0], feeds)
    if len(raw) != len(expected):
        raise ArmLoweringError(f"the TOSA graph has {len(raw)} outputs, the program {len(expected)}")
    got: list[torch.Tensor] = []
    quanta = 0.0
    for index, (array, reference) in enumerate(zip(raw, expected, strict=True)):
        value = torch.from_numpy(np.asarray(array).astype(np.float32)).reshape(reference.shape)
        if integer:
            scale, zp = lowering.output_qparams[index]
            value = (value - zp) * scale
            quanta = max(quanta, float((value - reference).abs().max()) / scale)
        got.append(value)
    error = max(float((g - e).abs().max()) for g, e in zip(got, expected, strict=True))
    sqnr = sqnr_db(list(expected), got)
    compared = (
        "TOSA reference model vs torch fake-quantized program"
        if integer
        else "TOSA reference model vs torch float program (eager)"
    )
    return ReferenceCheck(
        compared=compared, max_abs_error=error, sqnr_db=sqnr, max_error_quanta=round(quanta, 3) if integer else None
    )
