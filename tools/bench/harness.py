"""Run two contenders alternately, N times each, and report medians and their ratio.

A contender is a Python callable (timed in this process) or a command line (timed
as a fresh subprocess, for cold-start costs). Runs alternate A, B, A, B, ... so that
drift in the machine's load hits both alike.

    from bench.harness import Contender, compare
    report = compare(Contender("upstream", slow), Contender("lowerkit", fast), repeat=5)
    print(report.table())
"""

from __future__ import annotations

import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path


@dataclass(frozen=True)
class Contender:
    """A named thing to time: a callable, or a command run as a fresh subprocess."""

    name: str
    target: Callable[[], object] | Sequence[str]
    #: Environment additions for a command.
    env: dict[str, str] = field(default_factory=dict)

    def run_once(self) -> float:
        """Run once and return wall seconds; a failing command raises with its output."""
        if callable(self.target):
            start = time.perf_counter()
            self.target()
            return time.perf_counter() - start
        start = time.perf_counter()
        done = subprocess.run(
            list(self.target),
            env={**os.environ, **self.env},
            capture_output=True,
            text=True,
            check=False,
        )
        elapsed = time.perf_counter() - start
        if done.returncode != 0:
            raise RuntimeError(
                f"{self.name}: command {list(self.target)} exited {done.returncode}:\n"
                f"{done.stdout[-2000:]}\n{done.stderr[-4000:]}"
            )
        return elapsed


@dataclass(frozen=True)
class Timing:
    """Wall seconds of every run of one contender."""

    name: str
    seconds: list[float]

    @property
    def median(self) -> float:
        return statistics.median(self.seconds)

    @property
    def minimum(self) -> float:
        return min(self.seconds)

    @property
    def maximum(self) -> float:
        return max(self.seconds)


@dataclass(frozen=True)
class Comparison:
    """The outcome of `compare`: the baseline, the candidate and the median ratio."""

    title: str
    baseline: Timing
    candidate: Timing

    @property
    def ratio(self) -> float:
        """Baseline median over candidate median (> 1 means the candidate is faster)."""
        return self.baseline.median / self.candidate.median if self.candidate.median else float("inf")

    def table(self) -> str:
        """A plain-text table: min / median / max per contender and the ratio."""
        lines = [
            f"{self.title}",
            f"  {'contender':<28} {'runs':>4} {'min s':>10} {'median s':>10} {'max s':>10}",
        ]
        for timing in (self.baseline, self.candidate):
            lines.append(
                f"  {timing.name:<28} {len(timing.seconds):>4} {timing.minimum:>10.4f}"
                f" {timing.median:>10.4f} {timing.maximum:>10.4f}"
            )
        lines.append(
            f"  median ratio {self.baseline.name} / {self.candidate.name}: {self.ratio:.2f}x"
        )
        return "\n".join(lines)

    def to_json(self) -> dict[str, object]:
        """A JSON-ready dict with every run's time, the medians and the ratio."""
        return {
            "title": self.title,
            "baseline": {**asdict(self.baseline), "median": self.baseline.median},
            "candidate": {**asdict(self.candidate), "median": self.candidate.median},
            "ratio": self.ratio,
        }


def compare(
    baseline: Contender,
    candidate: Contender,
    *,
    repeat: int = 5,
    warmup: int = 0,
    title: str | None = None,
    progress: bool = True,
) -> Comparison:
    """Time `baseline` and `candidate` alternately, `repeat` times each after `warmup` rounds."""
    if repeat < 1:
        raise ValueError(f"repeat must be at least 1, got {repeat}")
    for _ in range(warmup):
        baseline.run_once()
        candidate.run_once()
    times: dict[str, list[float]] = {baseline.name: [], candidate.name: []}
    for round_index in range(repeat):
        for contender in (baseline, candidate):
            seconds = contender.run_once()
            times[contender.name].append(seconds)
            if progress:
                print(
                    f"  [{round_index + 1}/{repeat}] {contender.name}: {seconds:.4f} s",
                    file=sys.stderr,
                    flush=True,
                )
    return Comparison(
        title or f"{baseline.name} vs {candidate.name}",
        Timing(baseline.name, times[baseline.name]),
        Timing(candidate.name, times[candidate.name]),
    )


def write_json(comparisons: Sequence[Comparison], path: str | os.PathLike[str]) -> None:
    """Write the comparisons to `path` as JSON, atomically."""
    target = Path(path)
    target.parent.mkdir(parents=True, exist_ok=True)
    payload = json.dumps([c.to_json() for c in comparisons], indent=2) + "\n"
    with tempfile.NamedTemporaryFile("w", dir=target.parent, delete=False, suffix=".tmp") as out:
        out.write(payload)
    os.replace(out.name, target)
