"""Fill a report's sensitivity scan and keep-float advice from trial lowerings a backend makes."""

from __future__ import annotations

from collections.abc import Callable

from lowerkit.pass_infra.numerics.keep_float import (
    DEFAULT_TARGET_DB,
    KeepFloatAdvice,
    Trial,
    search_keep_float,
)
from lowerkit.pass_infra.numerics.report import DebugReport, Sensitivity

__all__ = ["advise_keep_float"]


def advise_keep_float(
    report: DebugReport,
    evaluate: Callable[[tuple[str, ...]], float],
    *,
    scan: int,
    search: int,
    target_db: float = DEFAULT_TARGET_DB,
) -> None:
    """Try the `scan` layers most to blame in float one at a time (``report.sensitivity``) and,
    with `search` > 0 and the output under `target_db`, the groups sharing a producer's scale and
    up to `search` more trials towards the smallest set reaching it (``report.keep_float_advice``).

    `evaluate(names)` is the output SQNR (dB) against float with the modules `names` kept in
    float (on top of any the report was made with).
    """
    if scan <= 0:
        return
    candidates = report.keep_float_candidates(scan)
    singles = [c for c in candidates if len(c) == 1]
    advice: KeepFloatAdvice | None = None
    if search > 0 and report.output_sqnr_db < target_db and candidates:
        advice = search_keep_float(candidates, evaluate, report.output_sqnr_db, target_db, len(candidates) + search)
        trials = advice.trials
    else:
        trials = tuple(Trial(c, evaluate(c)) for c in singles)
        if search > 0:
            baseline = report.output_sqnr_db
            advice = KeepFloatAdvice((), baseline, baseline, target_db, trials, len(trials))
    report.sensitivity = sorted(
        (Sensitivity(t.names[0], t.output_sqnr_db, t.output_sqnr_db - report.output_sqnr_db) for t in trials if t.names in singles),
        key=lambda s: -s.gain_db,
    )
    report.keep_float_advice = advice
