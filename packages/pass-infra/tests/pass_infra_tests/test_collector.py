"""SETTLED_HEAP: the heap a scope starts with is frozen for the scope, and only for it."""

from __future__ import annotations

import gc
import weakref
from collections.abc import Iterator

import pytest

from lowerkit.pass_infra.accelerations.settled_heap import SETTLED_HEAP


class _Cycle:
    def __init__(self) -> None:
        self.me = self


@pytest.fixture(autouse=True)
def _unfrozen_process() -> Iterator[None]:
    assert gc.get_freeze_count() == 0
    yield
    gc.unfreeze()


def test_the_heap_is_frozen_inside_and_given_back_on_exit() -> None:
    before = _Cycle()
    with SETTLED_HEAP.scope():
        assert gc.get_freeze_count() > 0
        assert not any(o is before for o in gc.get_objects())  # frozen: in no generation
    assert gc.get_freeze_count() == 0
    assert any(o is before for o in gc.get_objects())


def test_garbage_made_inside_is_collected_inside() -> None:
    with SETTLED_HEAP.scope():
        made_inside = weakref.ref(_Cycle())
        gc.collect()
        assert made_inside() is None


def test_garbage_from_before_waits_for_the_exit() -> None:
    old = weakref.ref(_Cycle())
    with SETTLED_HEAP.scope():
        gc.collect()
        assert old() is not None
    gc.collect()
    assert old() is None


def test_nested_scopes_unfreeze_once_at_the_last_exit() -> None:
    with SETTLED_HEAP.scope():
        frozen = gc.get_freeze_count()
        with SETTLED_HEAP.scope():
            assert gc.get_freeze_count() == frozen
        assert gc.get_freeze_count() == frozen
    assert gc.get_freeze_count() == 0


def test_an_exception_still_unfreezes() -> None:
    with pytest.raises(RuntimeError), SETTLED_HEAP.scope():
        raise RuntimeError("boom")
    assert gc.get_freeze_count() == 0


def test_a_process_that_froze_its_own_objects_is_left_alone() -> None:
    theirs = _Cycle()
    gc.freeze()
    after_their_freeze = _Cycle()
    with SETTLED_HEAP.scope():
        assert any(o is after_their_freeze for o in gc.get_objects())  # not frozen by the scope
    assert not any(o is theirs for o in gc.get_objects())  # theirs stay frozen after it
    assert gc.get_freeze_count() > 0


def _garbage_cycles() -> weakref.ref[_Cycle]:
    """As many garbage cycles as the process has tracked objects (the heap grows by over a
    quarter); a weak reference to one of them."""
    grown = [_Cycle() for _ in range(len(gc.get_objects()))]
    return weakref.ref(grown[0])


def test_a_heap_grown_by_a_quarter_is_collected_before_the_next_scope_freezes_it() -> None:
    """Garbage made between back-to-back scopes is not frozen by scope after scope for ever; the
    collection waits for the next scope rather than ending this one."""
    gc.disable()  # only SETTLED_HEAP collects here
    try:
        _garbage_cycles()
        with SETTLED_HEAP.scope():  # collects: the heap is measured from here on
            pass
        small = weakref.ref(_Cycle())
        with SETTLED_HEAP.scope():
            assert small() is not None  # a few objects more: no full collection
        witness = _garbage_cycles()
        with SETTLED_HEAP.scope():
            assert witness() is None and small() is None  # collected, not frozen with the rest
    finally:
        gc.enable()


def test_the_last_exit_leaves_the_garbage_made_inside_to_the_collector() -> None:
    gc.disable()
    try:
        _garbage_cycles()
        with SETTLED_HEAP.scope():  # opens on a grown heap (collected on the way in)
            witness = _garbage_cycles()
        assert witness() is not None  # no walk of everything the scope made on the way out
        gc.collect()
        assert witness() is None
    finally:
        gc.enable()


def test_full_collections_are_spaced_out_inside_and_the_thresholds_given_back() -> None:
    from lowerkit.pass_infra.accelerations.settled_heap import FULL_COLLECTION_EVERY

    before = gc.get_threshold()
    with SETTLED_HEAP.scope():
        assert gc.get_threshold() == (before[0], before[1], max(before[2], FULL_COLLECTION_EVERY))
    assert gc.get_threshold() == before


def test_thresholds_the_program_set_inside_are_kept() -> None:
    before = gc.get_threshold()
    try:
        with SETTLED_HEAP.scope():
            gc.set_threshold(1000, 20, 20)
        assert gc.get_threshold() == (1000, 20, 20)
    finally:
        gc.set_threshold(*before)


def test_a_process_that_froze_its_own_objects_keeps_its_thresholds() -> None:
    before = gc.get_threshold()
    gc.freeze()
    with SETTLED_HEAP.scope():
        assert gc.get_threshold() == before
