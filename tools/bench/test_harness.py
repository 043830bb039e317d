import json
import sys

import pytest

from bench import harness
from bench.harness import Comparison, Contender, Timing, compare, write_json


class _Clock:
    """A perf_counter that moves only when a contender says it worked (no wall time in a test)."""

    def __init__(self) -> None:
        self.now = 0.0

    def perf_counter(self) -> float:
        return self.now


def test_alternates_and_reports_medians_and_ratio(tmp_path, monkeypatch):
    order: list[str] = []
    clock = _Clock()
    monkeypatch.setattr(harness, "time", clock)

    def slow() -> None:
        order.append("slow")
        clock.now += 0.02

    def fast() -> None:
        order.append("fast")
        clock.now += 0.005

    result = compare(Contender("slow", slow), Contender("fast", fast), repeat=3, progress=False)
    assert order == ["slow", "fast"] * 3
    assert result.baseline.seconds == pytest.approx([0.02] * 3)
    assert result.candidate.seconds == pytest.approx([0.005] * 3)
    assert result.ratio == pytest.approx(4.0)
    assert "median ratio slow / fast" in result.table()
    write_json([result], tmp_path / "out" / "bench.json")
    saved = json.loads((tmp_path / "out" / "bench.json").read_text())
    assert saved[0]["baseline"]["seconds"] == result.baseline.seconds
    assert saved[0]["ratio"] == pytest.approx(result.ratio)


def test_commands_run_as_fresh_processes_and_failures_raise():
    ok = Contender("ok", [sys.executable, "-c", "pass"])
    assert ok.run_once() > 0
    bad = Contender("bad", [sys.executable, "-c", "import sys; print('boom'); sys.exit(3)"])
    with pytest.raises(RuntimeError, match="exited 3"):
        bad.run_once()


def test_repeat_must_be_positive():
    with pytest.raises(ValueError, match="repeat"):
        compare(Contender("a", lambda: None), Contender("b", lambda: None), repeat=0)


def test_ratio_and_table_from_known_times():
    result = Comparison(
        "known", Timing("stock", [3.0, 1.0, 2.0]), Timing("lowerkit", [0.25, 1.0, 0.5])
    )
    assert (result.baseline.median, result.candidate.median) == (2.0, 0.5)
    assert result.ratio == 4.0
    table = result.table()
    assert "median ratio stock / lowerkit: 4.00x" in table
    assert "1.0000     2.0000     3.0000" in table
    assert result.to_json()["ratio"] == 4.0
