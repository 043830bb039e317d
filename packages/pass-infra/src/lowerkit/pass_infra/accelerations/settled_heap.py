"""Full garbage collections that leave the heap a lowering started with alone.

A lowering allocates enough to trigger CPython's full (oldest-generation) collections, and each
walks every object the process holds: torch, ExecuTorch and coremltools' modules, the user's
model, ~540,000 objects after an Arm import, ~0.3 s a walk on this machine, several walks per
lowering. None of those objects becomes garbage because of the lowering.

`SETTLED_HEAP` freezes them (``gc.freeze()``) when its first scope opens and unfreezes them
(``gc.unfreeze()``) when its last scope closes: inside, collections walk only what was made
since, and every object made inside is collected as before. Garbage cycles that already existed
when the scope opened wait until it closes. So that back-to-back scopes (a test suite, the
daemon) do not keep freezing garbage made before them, a first scope runs a full collection
before it freezes when the heap has grown by a quarter since the last one (CPython's own rule
for full collections; the heap measured in pymalloc's allocated blocks, read in O(1), where
counting the frozen objects would walk them all). The collection waits for the next scope
rather than ending this one: a lowering's last scope hands its result back without walking
everything it made (~1 s after DeiT-tiny's TOSA lowering), and a process that lowers once never
pays for it. Nothing a program computes depends on when the collector runs, so lowered programs
and ``.pte`` bytes are unchanged. If the process has frozen objects itself
(``gc.get_freeze_count()`` is not 0), the scope leaves the collector alone.

Freezing also empties the heap CPython measures its full-collection rule against (run one when
the objects that survived since the last grew by a quarter of the long-lived ones): with nothing
long-lived left, a full collection would run every ``threshold2`` (10) middle-generation
collections, each walking everything the lowering has made so far (5.5 s of DeiT-tiny's TOSA
lowering, 36 walks). Inside the scope ``threshold2`` is `FULL_COLLECTION_EVERY` (100); the young
generations are collected as often as before, and the thresholds are put back when the scope
closes. DeiT-tiny's peak RSS is unchanged.
"""

from __future__ import annotations

import gc
import sys
from contextlib import AbstractContextManager

from lowerkit.pass_infra.accelerations.patching import Patch

__all__ = ["FULL_COLLECTION_EVERY", "SETTLED_HEAP", "settled_heap"]

#: Inside the scope, a full collection runs at most every this many middle-generation collections.
FULL_COLLECTION_EVERY = 100

#: A first scope that finds the heap bigger than this (``sys.getallocatedblocks()``) runs a full
#: collection before it freezes; None until the first scope.
_collect_above: int | None = None
#: The collector's thresholds before the installed scope raised the last one; None when it froze
#: nothing. The patch installs once (first scope) and uninstalls once (last scope).
_thresholds: tuple[int, int, int] | None = None


def _grown_by_a_quarter(blocks: int) -> int:
    return blocks + blocks // 4


def _freeze() -> None:
    global _collect_above, _thresholds
    # O(frozen objects): instant unless the process froze objects itself.
    if gc.get_freeze_count() != 0:
        _thresholds = None
        return
    if _collect_above is None:
        _collect_above = _grown_by_a_quarter(sys.getallocatedblocks())
    elif sys.getallocatedblocks() > _collect_above:
        gc.collect()
        _collect_above = _grown_by_a_quarter(sys.getallocatedblocks())
    gc.freeze()
    _thresholds = gc.get_threshold()
    young, middle, full = _thresholds
    gc.set_threshold(young, middle, max(full, FULL_COLLECTION_EVERY))


def _unfreeze() -> None:
    global _thresholds
    thresholds, _thresholds = _thresholds, None
    if thresholds is None:
        return
    if gc.get_threshold() == (thresholds[0], thresholds[1], max(thresholds[2], FULL_COLLECTION_EVERY)):
        gc.set_threshold(*thresholds)  # unless the program set its own meanwhile
    gc.unfreeze()


#: Held by ``accelerated_lowering()`` and ``accelerated_quantization()``.
SETTLED_HEAP = Patch("lowerkit.pass_infra.accelerations.settled_heap", (), on_install=[_freeze], on_uninstall=[_unfreeze])


def settled_heap() -> AbstractContextManager[None]:
    """A scope of `SETTLED_HEAP`, for a whole lowering (export and quantization included)."""
    return SETTLED_HEAP.scope()
