import json
import sys
import time

import pytest

from bench.harness import Contender, compare, write_json


def test_alternates_and_reports_medians_and_ratio(tmp_path):
    order: list[str] = []

    def slow() -> None:
        order.append("slow")
        time.sleep(0.02)

    def fast() -> None:
        order.append("fast")

    result = compare(Contender("slow", slow), Contender("fast", fast), repeat=3, progress=False)
    assert order == ["slow", "fast"] * 3
    assert len(result.baseline.seconds) == len(result.candidate.seconds) == 3
    assert result.baseline.minimum <= result.baseline.median <= result.baseline.maximum
    assert result.ratio == result.baseline.median / result.candidate.median
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
