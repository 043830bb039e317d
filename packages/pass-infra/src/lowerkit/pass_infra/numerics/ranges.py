"""Range diagnostics: which channels of a quantized tensor set its scale, and what that leaves the others.

The classic int8 failure: a few channels set the per-tensor scale, and the other channels are
left with a handful of levels. The whole-tensor SQNR at that layer still looks fine (the
outlier channel is represented well and carries most of the energy); the damage shows
downstream, where the outlier is dropped or diluted.

Each channel's *reach* is the part of the quantization range it needs: from min(0, its min) to
max(0, its max), zero being exactly representable. A channel whose reach is many times the
median channel's sets the scale. Three shapes do it, and each is named:

- **offset**: far from zero with a small spread (a conv with one large bias; the "massive
  activations" of LLMs and many vision models): its *span* is normal, its *location* is not;
- **wide**: a large spread (a channel with much larger weights);
- **heavy-tailed**: a few of its values (some positions or tokens) reach far; the rest stay
  within the other channels' range.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

__all__ = ["DOMINANCE", "MIN_LEVELS", "RangeDiagnostic", "channel_axis", "range_diagnostic"]

#: A channel whose values span fewer quantization levels than this is starved.
MIN_LEVELS = 16
#: A channel whose reach is at least this many times the median channel's sets the scale.
DOMINANCE = 8.0
#: A setting channel with at most this share of its values outside the other channels' range is heavy-tailed.
TAIL_SHARE = 0.1


@dataclass(frozen=True)
class RangeDiagnostic:
    """How a tensor's quantization range is shared among its channels."""

    #: The channel with the largest reach (the one that sets the scale when flagged).
    channel: int
    #: Its reach over the median channel's reach.
    dominance: float
    #: Share of the tensor's values in channels spanning fewer than MIN_LEVELS levels.
    starved_share: float
    #: True when a few channels set the scale and leave the others starved.
    flagged: bool
    #: "offset", "wide" or "heavy-tailed": what makes `channel` reach so far.
    kind: str = "wide"
    #: `channel`'s min and max.
    low: float = 0.0
    high: float = 0.0
    #: `channel`'s share of the tensor's quantization range (its reach over the tensor's).
    share: float = 0.0
    #: The levels the median other channel spans, of `levels`.
    others_levels: float = 0.0
    levels: int = 256
    #: Every channel whose reach is DOMINANCE times the median's, widest first.
    setters: tuple[int, ...] = ()
    #: How many times finer the scale would be without the setting channels.
    scale_gain: float = 1.0
    #: Heavy-tailed: how many of `channel`'s values lie outside the other channels' range, of how many.
    tail: tuple[int, int] = (0, 0)

    def describe(self) -> str:
        """One line for a report: which channel, what shape, what it does to the others' levels."""
        which = f"channel {self.channel}"
        if self.kind == "offset":
            shape = f"{which} sits at {self.low:.3g}..{self.high:.3g}"
        elif self.kind == "heavy-tailed":
            far = self.high if abs(self.high) >= abs(self.low) else self.low
            shape = f"{which} is heavy-tailed: {self.tail[0]} of its {self.tail[1]} values reach {far:.3g}"
        else:
            shape = f"{which} spans {self.low:.3g}..{self.high:.3g} ({self.dominance:.0f}x the median channel's range)"
        more = len(self.setters) - 1
        also = f" (with {more} more channel{'s' if more > 1 else ''})" if more > 0 else ""
        return (
            f"{shape} and sets the scale{also}: the other channels get ~{self.others_levels:.0f} of "
            f"{self.levels} levels (the scale would be {self.scale_gain:.0f}x finer without it)"
        )

    def to_json(self) -> dict[str, Any]:
        """The `range` field of a layer in the JSON report."""
        return {
            "channel": self.channel,
            "kind": self.kind,
            "low": self.low,
            "high": self.high,
            "share": self.share,
            "dominance": _finite(self.dominance),
            "others_levels": self.others_levels,
            "levels": self.levels,
            "setters": list(self.setters),
            "scale_gain": _finite(self.scale_gain),
            "starved_share": self.starved_share,
            "flagged": self.flagged,
            "describe": self.describe(),
        }


def _finite(value: float) -> float | str:
    return value if np.isfinite(value) else str(value)


def channel_axis(op: str, ndim: int) -> int:
    """Where a layer's output keeps its channels: dim 1 for convolutions and 4-D tensors (NCHW),
    the last dim otherwise (linear, matmul, attention: ``[..., tokens, features]``)."""
    return 1 if "conv" in op or ndim == 4 else -1


def _reach(low: np.ndarray, high: np.ndarray) -> np.ndarray:
    return np.maximum(high, 0.0) - np.minimum(low, 0.0)


def _kind(values: np.ndarray, low: float, high: float, rest: tuple[float, float]) -> tuple[str, tuple[int, int]]:
    """offset / wide / heavy-tailed for a setting channel's values, given the other channels' (low, high)."""
    margin = 0.5 * (rest[1] - rest[0])
    outside = int(np.count_nonzero((values < rest[0] - margin) | (values > rest[1] + margin)))
    if 0 < outside <= TAIL_SHARE * values.size:
        return "heavy-tailed", (outside, int(values.size))
    span = high - low
    if (low > 0 or high < 0) and min(abs(low), abs(high)) >= span:
        return "offset", (outside, int(values.size))
    return "wide", (outside, int(values.size))


def range_diagnostic(
    values: Any, scale: float, axis: int = 1, levels: int = 256
) -> RangeDiagnostic | None:
    """How `values` (one float tensor) share the `levels` quantization levels of `scale` among the
    channels along `axis`; None for a 0/1-D tensor or one with too few values per channel."""
    array = values.detach().cpu().double().numpy() if hasattr(values, "detach") else np.asarray(values, np.float64)
    if array.ndim < 2 or scale <= 0:
        return None
    count = array.shape[axis]
    if count < 2 or array.size < 4 * count:
        return None  # too few values per channel to speak of a channel's range
    per_channel = np.moveaxis(array, axis, 0).reshape(count, -1)
    low, high = per_channel.min(axis=1), per_channel.max(axis=1)
    reach = _reach(low, high)
    spans = high - low
    widest = int(np.argmax(reach))
    # Channels holding one value (dead after a ReLU, or constant) need no levels: the median and
    # the channels a wide scale starves are taken among the live ones (any channel can set it).
    live = np.flatnonzero(spans > 0)
    if live.size < 2:
        return None
    median = float(np.median(reach[live]))
    dominance = float(reach[widest] / median)
    setters = [int(c) for c in np.argsort(-reach, kind="stable") if reach[c] >= DOMINANCE * median]
    others = np.setdiff1d(live, setters or [widest])
    if others.size == 0:
        return None
    rest = (float(low[others].min()), float(high[others].max()))
    rest_reach = float(_reach(np.array(rest[0]), np.array(rest[1])))
    total = float(_reach(np.array(low.min()), np.array(high.max())))
    kind, tail = _kind(per_channel[widest], float(low[widest]), float(high[widest]), rest)
    others_levels = float(np.median(spans[others])) / scale
    starved = float(np.mean(spans / scale < MIN_LEVELS))  # channels hold equally many values
    return RangeDiagnostic(
        channel=widest,
        dominance=round(dominance, 2) if np.isfinite(dominance) else dominance,
        starved_share=round(starved, 4),
        flagged=bool(setters) and len(setters) <= max(1, count // 4) and others_levels < MIN_LEVELS,
        kind=kind,
        low=float(low[widest]),
        high=float(high[widest]),
        share=round(float(reach[widest]) / total, 4) if total > 0 else 0.0,
        others_levels=round(others_levels, 2),
        levels=levels,
        setters=tuple(setters),
        scale_gain=round(total / rest_reach, 2) if rest_reach > 0 else float("inf"),
        tail=tail,
    )
