"""Range diagnostics: a quantized tensor whose range a few channels dominate.

The classic int8 failure: one outlier channel sets the scale, and the other channels are left
with a handful of levels. The whole-tensor SQNR at that layer still looks fine (the outlier
channel is represented well and carries most of the energy); the damage shows downstream,
where the outlier is dropped or diluted.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

__all__ = ["MIN_LEVELS", "RangeDiagnostic", "range_diagnostic"]

#: A channel whose values span fewer quantization levels than this is starved.
MIN_LEVELS = 16
#: Flag when the widest channel's range is at least this many times the median channel's.
DOMINANCE = 8.0


@dataclass(frozen=True)
class RangeDiagnostic:
    """How a tensor's quantization range is shared among its channels."""

    #: The channel with the widest range.
    channel: int
    #: Its range over the median channel range.
    dominance: float
    #: Share of the tensor's values in channels spanning fewer than MIN_LEVELS levels.
    starved_share: float
    #: True when one channel dominates and leaves the others starved.
    flagged: bool

    def describe(self) -> str:
        """One line for a report."""
        return (
            f"channel {self.channel} spans {self.dominance:.0f}x the median channel range; "
            f"{self.starved_share:.0%} of the values get fewer than {MIN_LEVELS} int8 levels"
        )


def range_diagnostic(values: Any, scale: float, channel_axis: int = 1) -> RangeDiagnostic | None:
    """How `values` (one tensor, float) use the int8 levels of `scale`; None for a 0/1-D tensor."""
    array = values.detach().cpu().double().numpy() if hasattr(values, "detach") else np.asarray(values, np.float64)
    if array.ndim < 2 or scale <= 0 or array.shape[channel_axis] < 2 or array.size < 4 * array.shape[channel_axis]:
        return None  # too few values per channel to speak of a channel's range
    per_channel = np.moveaxis(array, channel_axis, 0).reshape(array.shape[channel_axis], -1)
    spans = per_channel.max(axis=1) - per_channel.min(axis=1)
    levels = spans / scale
    widest = int(np.argmax(spans))
    median = float(np.median(spans))
    dominance = float(spans[widest] / median) if median > 0 else float("inf")
    starved = float(np.mean(levels < MIN_LEVELS))  # channels hold equally many values
    return RangeDiagnostic(
        channel=widest,
        dominance=round(dominance, 2) if np.isfinite(dominance) else dominance,
        starved_share=round(starved, 4),
        flagged=bool(dominance >= DOMINANCE and starved >= 0.5),
    )
