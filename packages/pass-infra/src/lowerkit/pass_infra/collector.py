"""Full garbage collections that leave the heap a lowering started with alone.

A lowering allocates enough to trigger CPython's full (oldest-generation) collections, and each
walks every object the process holds: torch, ExecuTorch and coremltools' modules, the user's
model, ~540,000 objects after an Arm import, ~0.3 s a walk on this machine, several walks per
lowering. None of those objects becomes garbage because of the lowering.

`SETTLED_HEAP` freezes them (``gc.freeze()``) when its first scope opens and unfreezes them
(``gc.unfreeze()``) when its last scope closes: inside, collections walk only what was made
since, and every object made inside is collected as before. Garbage cycles that already existed
when the scope opened wait until it closes; so that back-to-back scopes (a test suite, the
daemon) do not keep freezing garbage made between them, the last exit runs a full collection
when the heap a scope froze has grown by a quarter since the last one (CPython's own rule for
full collections). Nothing a program computes depends on when the collector runs, so lowered
programs and ``.pte`` bytes are unchanged. If the process has frozen objects itself
(``gc.get_freeze_count()`` is not 0), the scope leaves the collector alone.
"""

from __future__ import annotations

import gc
from contextlib import AbstractContextManager

from lowerkit.pass_infra.patching import Patch

__all__ = ["SETTLED_HEAP", "settled_heap"]

#: Per installed scope: the number of objects it froze (None: it froze nothing).
_frozen: list[int | None] = []
#: A scope that freezes more objects than this runs a full collection when it closes.
_collect_above: list[int] = []


def _freeze() -> None:
    if gc.get_freeze_count() != 0:
        _frozen.append(None)
        return
    gc.freeze()
    heap = gc.get_freeze_count()
    if not _collect_above:
        _collect_above.append(heap + heap // 4)
    _frozen.append(heap)


def _unfreeze() -> None:
    heap = _frozen.pop()
    if heap is None:
        return
    gc.unfreeze()
    if heap > _collect_above[0]:
        gc.collect()
        survivors = len(gc.get_objects())
        _collect_above[0] = survivors + survivors // 4


#: Held by ``accelerated_lowering()`` and ``accelerated_quantization()``.
SETTLED_HEAP = Patch("lowerkit.pass_infra.collector", (), on_install=[_freeze], on_uninstall=[_unfreeze])


def settled_heap() -> AbstractContextManager[None]:
    """A scope of `SETTLED_HEAP`, for a whole lowering (export and quantization included)."""
    return SETTLED_HEAP.scope()
