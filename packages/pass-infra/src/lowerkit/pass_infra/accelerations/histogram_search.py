"""HistogramObserver's min / max search without a tensor operation per step.

torchao's ``HistogramObserver._non_linear_param_search`` (the L2 search behind the int8
activation ranges of ExecuTorch's Arm and XNNPACK quantizers) walks its cumulative histogram
with 0-d tensor indexing and comparisons, ~800 steps of a few tensor operations each per call:
~15 ms per observer, most of ``convert_pt2e``'s time. `non_linear_param_search` takes the
same steps on Python floats. It is exact, not an approximation:

- the cumulative sums are torch's own ``cumsum``, read out as floats (exact for float32 /
  float64);
- a comparison of a 0-d tensor with a Python float casts the float to the tensor's dtype
  (torch's wrapped-number rule), so each bound is rounded to that dtype first;
- bin walks over a non-decreasing cumulative sum are bisections (a linear walk otherwise),
  and once both bounds are one bin, the steps that cannot move them are not taken;
- the quantization error and the final min / max are computed by the observer's own methods
  and tensor arithmetic.

A test runs stock's search and this one on many histograms, shapes of data and dtypes, and
compares the results bit for bit.
"""

from __future__ import annotations

import bisect
import itertools
import struct
from typing import Any

import torch

from lowerkit.pass_infra import _upstream
from lowerkit.pass_infra.accelerations.patching import Patch, Replacement

__all__ = ["HISTOGRAM_SEARCH", "non_linear_param_search"]

_STEP = 1e-5  # upstream's granularity


def _rounder(dtype: torch.dtype) -> Any:
    """How torch rounds a Python float compared with a 0-d tensor of `dtype`."""
    if dtype == torch.float32:
        pack = struct.Struct("f")
        return lambda value: pack.unpack(pack.pack(value))[0]
    if dtype == torch.float64:
        return float
    return lambda value: torch.tensor(value, dtype=dtype).item()  # any other dtype, slower


def _non_decreasing(values: list[float]) -> bool:
    return all(a <= b for a, b in itertools.pairwise(values))


def non_linear_param_search(observer: Any) -> tuple[torch.Tensor, torch.Tensor]:
    """``HistogramObserver._non_linear_param_search(observer)``, the same result, without per-step tensors."""
    assert observer.histogram.size()[0] == observer.bins, "bins mismatch"
    cumulative = torch.cumsum(observer.histogram, dim=0)
    rounded = _rounder(cumulative.dtype)
    bin_width = (observer.max_val - observer.min_val) / observer.bins
    total = torch.sum(observer.histogram).item()
    sums: list[float] = cumulative.tolist()
    sorted_sums = _non_decreasing(sums)

    alpha, beta = 0.0, 1.0
    start_bin, end_bin = 0, observer.bins - 1
    norm_min = float("inf")
    while alpha < beta:
        if start_bin == end_bin:
            # Upstream's walks cannot move either bin any more; its remaining steps (up to
            # ~50,000 when the data is one value) only shrink beta, and change nothing.
            break
        next_alpha = alpha + _STEP
        next_beta = beta - _STEP
        low, high = rounded(next_alpha * total), rounded(next_beta * total)
        if sorted_sums:
            # First l in [start_bin, end_bin) with sums[l] >= low, else end_bin; last r in
            # (start_bin, end_bin] with sums[r] <= high, else start_bin (upstream's walks).
            left = bisect.bisect_left(sums, low, start_bin, end_bin)
            right = bisect.bisect_right(sums, high, start_bin + 1, end_bin + 1) - 1
        else:
            left, right = start_bin, end_bin
            while left < end_bin and sums[left] < low:
                left += 1
            while right > start_bin and sums[right] > high:
                right -= 1

        next_start_bin, next_end_bin = start_bin, end_bin
        if (left - start_bin) > (end_bin - right):
            next_start_bin = left
            alpha = next_alpha
        else:
            next_end_bin = right
            beta = next_beta
        if next_start_bin == start_bin and next_end_bin == end_bin:
            continue
        norm = _upstream.histogram_quantization_error(observer, next_start_bin, next_end_bin)
        if norm > norm_min:
            break
        norm_min = norm
        start_bin, end_bin = next_start_bin, next_end_bin

    new_min = observer.min_val + bin_width * start_bin
    new_max = observer.min_val + bin_width * (end_bin + 1)
    return new_min, new_max


def _replacements() -> list[Replacement]:
    return [
        Replacement(
            _upstream.histogram_observer_class(), _upstream.HISTOGRAM_SEARCH_METHOD, non_linear_param_search
        )
    ]


#: HistogramObserver's min / max search on Python floats (`histogram_search`).
HISTOGRAM_SEARCH = Patch("lowerkit.pass_infra.accelerations.histogram_search", _replacements)
