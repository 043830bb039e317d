"""How far one tensor is from another: SQNR, max abs error, error in quanta, cosine similarity."""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import numpy as np

from lowerkit.pass_infra.numerics.sqnr import sqnr_db

__all__ = ["TensorError", "tensor_error"]


@dataclass(frozen=True)
class TensorError:
    """An approximation against its reference."""

    sqnr_db: float
    max_abs_error: float
    cosine: float
    #: The largest error in steps of the tensor's quantization scale (quantized tensors only).
    max_error_quanta: float | None = None

    def to_json(self) -> dict[str, Any]:
        """Plain numbers; inf / nan become strings so the JSON stays valid."""
        return {
            "sqnr_db": _number(self.sqnr_db),
            "max_abs_error": _number(self.max_abs_error),
            "cosine": _number(self.cosine),
            "max_error_quanta": _number(self.max_error_quanta) if self.max_error_quanta is not None else None,
        }


def _number(value: float) -> float | str:
    return value if math.isfinite(value) else str(value)


def _array(value: Any) -> np.ndarray:
    if hasattr(value, "detach"):
        value = value.detach().cpu().double().numpy()
    return np.asarray(value, dtype=np.float64).reshape(-1)


def tensor_error(reference: Any, approximation: Any, scale: float | None = None) -> TensorError:
    """The error of `approximation` against `reference` (arrays or tensors of one size)."""
    want, got = _array(reference), _array(approximation)
    if want.size != got.size:
        raise ValueError(f"cannot compare tensors of {want.size} and {got.size} elements")
    diff = np.abs(want - got)
    largest = float(diff.max()) if diff.size else 0.0
    norms = float(np.linalg.norm(want) * np.linalg.norm(got))
    cosine = float(np.dot(want, got) / norms) if norms else (1.0 if largest == 0.0 else 0.0)
    quanta = round(largest / scale, 3) if scale else None
    return TensorError(sqnr_db(want, got), largest, cosine, quanta)
