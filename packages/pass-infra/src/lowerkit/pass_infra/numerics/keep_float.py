"""The smallest set of layers to keep in float that brings the output to a target SQNR.

A search over trial lowerings (each: the quantized program with some modules left in float,
its output SQNR against float), bounded by a number of trials:

1. every candidate alone, in the order given (the single-layer scan, the report's sensitivity);
   a candidate may be a group (a producer and the data-movement ops sharing its quantization
   parameters: on Arm a slice after a conv shares the conv's scale, so keeping the conv alone
   in float still quantizes its output with the outlier in it);
2. if none reaches the target, greedy: add to the best set so far the candidate that raises the
   output most, until the target is reached or nothing adds more than `MIN_GAIN_DB`;
3. then drop every name the set does not need (a trial each), so the set is small.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

__all__ = ["DEFAULT_TARGET_DB", "MIN_GAIN_DB", "PRUNE_RESERVE", "KeepFloatAdvice", "Trial", "outermost", "search_keep_float"]

#: The default output SQNR to reach: 30 dB is an error energy of 0.1% of the signal (an rms error
#: ~3% of the rms output), where int8 stops being what limits a classifier's or an embedding's
#: agreement with float; per-tensor int8 of a well-behaved network lands at 25-40 dB.
DEFAULT_TARGET_DB = 30.0
#: A set (or a name added to it) must raise the output SQNR by more than this to count.
MIN_GAIN_DB = 0.5
#: Trials the greedy growth leaves for dropping the names a set does not need.
PRUNE_RESERVE = 2


@dataclass(frozen=True)
class Trial:
    """One trial lowering: these modules kept in float, and the output SQNR against float."""

    names: tuple[str, ...]
    output_sqnr_db: float

    def to_json(self) -> dict[str, Any]:
        """Names and SQNR (inf / nan as strings)."""
        return {"names": list(self.names), "output_sqnr_db": _finite(self.output_sqnr_db)}


@dataclass(frozen=True)
class KeepFloatAdvice:
    """The search's answer: the set to keep in float, the SQNR it reaches, and every trial made."""

    names: tuple[str, ...]
    output_sqnr_db: float
    baseline_db: float
    target_db: float
    trials: tuple[Trial, ...]
    #: The trials allowed.
    budget: int

    @property
    def reached(self) -> bool:
        """Whether the set reaches the target."""
        return bool(self.names) and self.output_sqnr_db >= self.target_db

    @property
    def helps(self) -> bool:
        """Whether the set raises the output by more than MIN_GAIN_DB."""
        return bool(self.names) and self.output_sqnr_db > self.baseline_db + MIN_GAIN_DB

    def flags(self) -> str:
        """``--keep-float a --keep-float b``."""
        return " ".join(f"--keep-float {name}" for name in self.names)

    def line(self) -> str:
        """One sentence for the advice."""
        tried = f"{len(self.trials)} trial lowering{'s' if len(self.trials) != 1 else ''}"
        if not self.names and self.baseline_db >= self.target_db:
            return f"the output ({_db(self.baseline_db)} dB) reaches the target ({self.target_db:g} dB) fully quantized"
        if not self.helps:
            best = max((t.output_sqnr_db - self.baseline_db for t in self.trials), default=0.0)
            return (
                f"no keep-float set found that raises the output above {_db(self.baseline_db)} dB "
                f"(target {self.target_db:g} dB; {tried}, the best {best:+.1f} dB): the error is spread over many "
                "layers, not made by a few; int16 activations (where the target has them), more representative "
                "calibration data or quantization-aware training raise it, keeping layers in float does not"
            )
        verdict = "reaches the target" if self.reached else "the best found, short of the target"
        return (
            f"keep {', '.join(self.names)} in float: output {_db(self.output_sqnr_db)} dB, from "
            f"{_db(self.baseline_db)} dB ({verdict}, {self.target_db:g} dB; {tried}): {self.flags()}"
        )

    def to_json(self) -> dict[str, Any]:
        """The `keep_float_advice` field of the JSON report."""
        return {
            "names": list(self.names),
            "output_sqnr_db": _finite(self.output_sqnr_db),
            "baseline_db": _finite(self.baseline_db),
            "target_db": self.target_db,
            "reached": self.reached,
            "helps": self.helps,
            "budget": self.budget,
            "trials": [t.to_json() for t in self.trials],
        }


def _finite(value: float) -> float | str:
    return value if math.isfinite(value) else str(value)


def _db(value: float) -> str:
    return f"{value:.1f}" if math.isfinite(value) else str(value)


class _Trials:
    """Trial lowerings, each set evaluated once, up to a budget."""

    def __init__(self, evaluate: Callable[[tuple[str, ...]], float], budget: int) -> None:
        self.evaluate, self.budget = evaluate, budget
        self.done: dict[frozenset[str], Trial] = {}

    @property
    def left(self) -> int:
        return self.budget - len(self.done)

    def run(self, names: Sequence[str]) -> Trial | None:
        """The trial of `names` (made now unless made before); None once the budget is spent."""
        kept = outermost(names)
        key = frozenset(kept)
        if key in self.done:
            return self.done[key]
        if self.left <= 0:
            return None
        trial = Trial(kept, self.evaluate(kept))
        self.done[key] = trial
        return trial


def outermost(names: Sequence[str]) -> tuple[str, ...]:
    """`names` without repeats and without modules inside another one named (``a.b`` with ``a``):
    keeping a module in float keeps everything in it."""
    unique = tuple(dict.fromkeys(names))
    return tuple(n for n in unique if not any(n != m and n.startswith(m + ".") for m in unique))


def _score(trial: Trial) -> float:
    return trial.output_sqnr_db if not math.isnan(trial.output_sqnr_db) else -math.inf


def _greedy(trials: _Trials, best: Trial, candidates: Sequence[tuple[str, ...]], target: float) -> Trial:
    """Grow `best` by the candidate that raises the output most, while it helps and trials remain."""
    while _score(best) < target and trials.left > PRUNE_RESERVE:
        grown = [
            t for c in candidates if not set(c) <= set(best.names)
            if (t := trials.run((*best.names, *c))) is not None
        ]
        if not grown:
            break
        top = max(grown, key=_score)
        if _score(top) <= _score(best) + MIN_GAIN_DB:
            break
        best = top
    return best


def _prune(trials: _Trials, best: Trial, target: float) -> Trial:
    """Drop each name `best` does not need: the rest still reaches the target (else loses under MIN_GAIN_DB)."""
    floor = target if _score(best) >= target else _score(best) - MIN_GAIN_DB
    for name in reversed(best.names):
        if len(best.names) == 1:
            break
        smaller = trials.run(tuple(n for n in best.names if n != name))
        if smaller is None:
            break
        if _score(smaller) >= floor:
            best = smaller
    return best


def search_keep_float(
    candidates: Sequence[tuple[str, ...]],
    evaluate: Callable[[tuple[str, ...]], float],
    baseline_db: float,
    target_db: float = DEFAULT_TARGET_DB,
    budget: int = 12,
) -> KeepFloatAdvice:
    """The smallest keep-float set found (see the module docstring) among `candidates` (each a
    tuple of module names), `evaluate(names)` giving the output SQNR with `names` in float;
    at most `budget` calls of `evaluate`."""
    trials = _Trials(evaluate, budget)
    if baseline_db >= target_db:
        return KeepFloatAdvice((), baseline_db, baseline_db, target_db, (), budget)
    singles = [t for c in candidates if (t := trials.run(c)) is not None]
    if not singles:
        return KeepFloatAdvice((), baseline_db, baseline_db, target_db, (), budget)
    reaching = [t for t in singles if _score(t) >= target_db]
    if reaching:
        best = min(reaching, key=lambda t: (len(t.names), -_score(t)))
    else:
        best = _greedy(trials, max(singles, key=_score), candidates, target_db)
    best = _prune(trials, best, target_db)
    if _score(best) <= baseline_db + MIN_GAIN_DB:
        best = Trial((), baseline_db)
    return KeepFloatAdvice(best.names, best.output_sqnr_db, baseline_db, target_db, tuple(trials.done.values()), budget)
