"""--verify: check a lowered program against the float model with what runs on Linux."""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import torch

from lowerkit.cli.model_source import Inputs, ModelSource
from lowerkit.cli.result import Lowered

COREML_CANNOT_RUN = (
    "Core ML itself cannot run on Linux: the Core ML program was checked through torch "
    "and its decoded weights, not executed"
)


def sqnr_db(reference: np.ndarray, approximation: np.ndarray) -> float:
    """Signal-to-quantization-noise ratio in dB (inf when equal)."""
    reference = np.asarray(reference, dtype=np.float64)
    noise = float(np.sum((reference - np.asarray(approximation, dtype=np.float64)) ** 2))
    signal = float(np.sum(reference**2))
    return math.inf if noise == 0.0 else 10.0 * math.log10(signal / noise) if signal else -math.inf


def _outputs(module: Any, inputs: Inputs) -> list[np.ndarray]:
    with torch.no_grad():
        result = module(*inputs)
    tensors = result if isinstance(result, list | tuple) else [result]
    return [t.detach().float().numpy() for t in tensors]


def verify_coreml(lowered: Lowered, source: ModelSource, payloads: list[bytes]) -> dict[str, Any]:
    """Quantization SQNR against float in torch, and decoded-weight SQNR, for a Core ML program."""
    from lowerkit.cli.coreml_payload import decoded_weights

    result: dict[str, Any] = {"note": COREML_CANNOT_RUN}
    float_outputs = _outputs(source.eager(), source.example_inputs)
    if lowered.reference is not None:
        quantized = _outputs(lowered.reference, source.example_inputs)
        result["output_sqnr_db"] = min(
            sqnr_db(f, q) for f, q in zip(float_outputs, quantized, strict=True)
        )
        result["compared"] = "quantized program in torch vs float eager, on the example inputs"
    weights = [w for payload in payloads for w in decoded_weights(payload).values()]
    if weights:
        parameters = [p.detach().numpy() for p in source.eager().parameters()]
        result["weight_sqnr_db"] = min(_best_match(w, parameters) for w in weights)
        result["decoded_weights"] = len(weights)
    return result


def _best_match(weight: np.ndarray, parameters: list[np.ndarray]) -> float:
    """SQNR of a decoded weight against the float parameter of the same shape it matches best."""
    candidates = [p for p in parameters if p.size == weight.size]
    if not candidates:
        return math.nan
    return max(sqnr_db(p.reshape(-1), weight.reshape(-1)) for p in candidates)


def verify_arm(lowered: Lowered, source: ModelSource) -> dict[str, Any]:
    """Run the TOSA flatbuffers on tosa-tools' reference model and compare with torch."""
    from lowerkit.arm_passes import verify_on_reference_model

    check = verify_on_reference_model(lowered.reference, source.example_inputs)
    result: dict[str, Any] = {
        "compared": check.compared,
        "max_abs_error": check.max_abs_error,
        "sqnr_db": check.sqnr_db,
    }
    if check.max_error_quanta is not None:
        result["max_error_quanta"] = check.max_error_quanta
    return result
