"""bench.floors' bookkeeping (no lowering here: the hooks' clocks and counters on plain functions)."""

from types import SimpleNamespace

from bench.floors import FloorProbe, Timers, _swapped


def test_a_call_nested_in_its_own_bucket_counts_once():
    timers = Timers()
    inner = timers.timed("serializer", lambda: None)
    outer = timers.timed("serializer", lambda: inner())
    outer()
    inner()
    assert timers.calls == {"serializer": 2}


def test_a_swapped_attribute_comes_back_even_an_inherited_one():
    class Base:
        def f(self):
            return "base"

    class Child(Base):
        pass

    with _swapped(Child, "f", lambda self: "timed"):
        assert Child().f() == "timed"
    assert Child().f() == "base" and "f" not in vars(Child)


def test_only_outermost_passes_that_changed_something_inside_the_lowering_count():
    probe = FloorProbe(coreml=False)
    changed = probe._counting(lambda self, module: SimpleNamespace(modified=True))
    unchanged = probe._counting(lambda self, module: SimpleNamespace(modified=False))
    wrapping = probe._counting(lambda self, module: changed(self, module))  # a pass running another
    changed(None, None)  # outside to_edge_transform_and_lower: not counted
    passes = (changed, unchanged, wrapping)
    probe.timers.timed("to_edge_transform_and_lower", lambda: [p(None, None) for p in passes])()
    assert probe.changed_passes == 2
