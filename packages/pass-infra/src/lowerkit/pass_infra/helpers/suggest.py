"""did_you_mean: the one "Did you mean ...?" hint of every lowerkit error (no torch import)."""

from __future__ import annotations

import difflib
from collections.abc import Iterable, Mapping

__all__ = ["did_you_mean"]


def did_you_mean(
    value: object,
    valid: Iterable[str] | Mapping[str, str],
    *,
    n: int = 1,
    ignore_case: bool = False,
) -> str:
    """``" Did you mean 'x'?"`` (``'x' or 'y'`` for n > 1) naming the closest valid names, else ``""``.

    A mapping's keys are matched and its values named (e.g. a bare name -> its full name).
    """
    shown = dict(valid) if isinstance(valid, Mapping) else {str(v): str(v) for v in valid}
    key = str(value)
    if ignore_case:
        key = key.lower()
        shown = {k.lower(): v for k, v in shown.items()}
    close = difflib.get_close_matches(key, list(shown), n=n)
    if not close:
        return ""
    return " Did you mean " + " or ".join(f"'{shown[c]}'" for c in close) + "?"
