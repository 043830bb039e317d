"""sqnr_db: the one signal-to-quantization-noise ratio of lowerkit's numerics checks."""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import numpy as np

__all__ = ["sqnr_db"]


def sqnr_db(reference: Any | Sequence[Any], approximation: Any | Sequence[Any]) -> float:
    """10·log10(signal / noise) in dB over all elements; inf when equal, -inf for a zero signal.

    Takes arrays or tensors, or equally long sequences of them (e.g. a model's outputs), which
    count as one signal. Sums run in float64.
    """
    pairs = (
        zip(reference, approximation, strict=True)
        if isinstance(reference, list | tuple)
        else [(reference, approximation)]
    )
    signal = noise = 0.0
    for want, got in pairs:
        expected = _float64(want)
        signal += float(np.sum(expected**2))
        noise += float(np.sum((expected - _float64(got)) ** 2))
    if noise == 0.0:
        return math.inf
    return 10.0 * math.log10(signal / noise) if signal else -math.inf


def _float64(value: Any) -> np.ndarray:
    if hasattr(value, "detach"):  # a torch tensor, without importing torch here
        value = value.detach().cpu().double().numpy()
    return np.asarray(value, dtype=np.float64)
