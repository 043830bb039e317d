"""Benchmark: ExecuTorch's stock Arm backend pipeline vs lowerkit.arm_passes, side by side.

For each model x target: (1) the backend pass pipeline alone (ArmPassManager vs
FastArmPassManager on deep copies of the same partitioned edge program, captured from a stock
lowering, copies made outside the timing), (2) the whole lowering (export -> quantize ->
partition + lower -> .pte bytes: stock ExecuTorch's public API, ``bench.realworld_flows.arm_public_api``,
vs lowerkit's ``lower_to_arm``), per stage (``bench.stages``: timers wrapped around the upstream
stage functions, nothing lowered changes), checking that every run of both sides wrote the
same .pte (sha256). Runs alternate stock / lowerkit; medians and their ratio are
printed (Markdown tables for the whole lowering), with the passes lowerkit ran/skipped and its
10 slowest passes. Exits 1 if any .pte differs.

    python -m bench.arm [--repeat 3] [--models cnn9_layernorm,mobilenet_v1_025]
                        [--targets TOSA-1.0+INT,ethos-u55-128] [--json out.json]
                        [--no-whole] [--no-pipeline]
"""

from __future__ import annotations

import argparse
import contextlib
import copy
import io
import json
import statistics
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from bench.harness import Comparison, Contender, compare
from bench.realworld_flows import arm_public_api
from bench.stages import STAGES, StageClock

DEFAULT_MODELS = ("cnn9_layernorm", "mobilenet_v1_025")
DEFAULT_TARGETS = ("TOSA-1.0+INT", "ethos-u55-128")


def _backend_inputs(name: str, target: str) -> list[tuple[Any, Any]]:
    from lowerkit import zoo
    from lowerkit.arm_passes import _upstream

    model = zoo.get(name)
    sink: list[tuple[Any, Any]] = []
    with _upstream.capture_backend_inputs(sink), contextlib.redirect_stdout(io.StringIO()):
        arm_public_api(model.module(), model.example_inputs(), target, model.calibration(4, 0))
    return sink


def _pipeline_runner(manager: type, programs: list[tuple[Any, Any]], copies: int) -> Callable[[], None]:
    pool = [[(copy.deepcopy(ep), spec) for ep, spec in programs] for _ in range(copies)]

    def run() -> None:
        for program, spec in pool.pop():
            manager(spec).transform_to_backend_pipeline(
                exported_program=program, graph_module=program.graph_module
            )

    return run


def bench_pipeline(name: str, target: str, repeat: int) -> tuple[Comparison, Any]:
    from lowerkit.arm_passes import FastArmPassManager, _upstream
    from lowerkit.arm_passes.runner import collect_reports

    programs = _backend_inputs(name, target)
    reports: list[Any] = []
    stock = _pipeline_runner(_upstream.ArmPassManager, programs, repeat)
    fast_run = _pipeline_runner(FastArmPassManager, programs, repeat)

    def fast() -> None:
        reports.clear()
        with collect_reports(reports):
            fast_run()

    result = compare(
        Contender("stock ArmPassManager", stock),
        Contender("lowerkit FastArmPassManager", fast),
        repeat=repeat,
        title=f"backend pipeline: {name} {target}",
    )
    return result, (reports[0] if reports else None)


@dataclass(frozen=True)
class WholeLowering:
    """The whole-lowering comparison of one model x target, per stage, with the .pte digests."""

    name: str
    target: str
    comparison: Comparison
    #: Per side ("stock", "lowerkit"): one {stage: seconds} per run (see bench.stages.STAGES).
    stages: dict[str, list[dict[str, float]]]
    #: Per side: the sha256 of each run's .pte.
    digests: dict[str, list[str]]

    @property
    def same_pte(self) -> bool:
        """True when every run of both sides wrote the same .pte bytes."""
        return len({d for runs in self.digests.values() for d in runs}) == 1

    def median(self, side: str, stage: str) -> float:
        """The median over `side`'s runs of `stage`'s seconds ("total": the whole lowering)."""
        return statistics.median(run[stage] for run in self.stages[side])

    def table(self) -> str:
        """Markdown: stage | stock s | lowerkit s | ratio (medians per stage), then the total."""
        lines = [
            f"whole lowering, per stage: {self.name} {self.target}",
            "| stage | stock s | lowerkit s | ratio |",
            "|---|---:|---:|---:|",
        ]
        for stage in (*STAGES, "total"):
            stock, fast = self.median("stock", stage), self.median("lowerkit", stage)
            ratio = f"{stock / fast:.2f}x" if fast >= 0.005 else "-"
            label = f"**{stage}**" if stage == "total" else stage
            lines.append(f"| {label} | {stock:.2f} | {fast:.2f} | {ratio} |")
        verdict = "same" if self.same_pte else "DIFFERENT"
        digests = sorted({d[:16] for runs in self.digests.values() for d in runs})
        lines.append(f".pte sha256: {verdict} in all runs of both sides ({', '.join(digests)})")
        return "\n".join(lines)

    def to_json(self) -> dict[str, object]:
        """The comparison's JSON plus per-run stage times and .pte digests."""
        return {
            **self.comparison.to_json(),
            "model": self.name,
            "target": self.target,
            "stages": self.stages,
            "pte_sha256": self.digests,
            "same_pte": self.same_pte,
        }


def bench_whole(name: str, target: str, repeat: int) -> WholeLowering:
    """Time stock's public-API lowering vs lowerkit's lower_to_arm, per stage (bench.stages), checking the .pte bytes."""
    from lowerkit import zoo
    from lowerkit.arm_passes import lower_to_arm

    model = zoo.get(name)
    calibration = model.calibration(4, 0)
    stages: dict[str, list[dict[str, float]]] = {"stock": [], "lowerkit": []}
    digests: dict[str, list[str]] = {"stock": [], "lowerkit": []}

    def lower(side: str) -> Callable[[], None]:
        modules = [model.module() for _ in range(repeat)]

        def run() -> None:
            clock = StageClock()
            # Vela prints its summary; lower_to_arm keeps it (vela_log), the stock flow is silenced alike.
            with clock.scope(), contextlib.redirect_stdout(io.StringIO()):
                if side == "stock":
                    digest = arm_public_api(modules.pop(), model.example_inputs(), target, calibration).pte_sha256
                else:
                    digest = lower_to_arm(modules.pop(), model.example_inputs(), target, calibration=calibration).pte_sha256
            stages[side].append({**clock.seconds, "total": clock.total})
            digests[side].append(digest)

        return run

    comparison = compare(
        Contender("stock (public API)", lower("stock")),
        Contender("lowerkit lower_to_arm", lower("lowerkit")),
        repeat=repeat,
        title=f"whole lowering: {name} {target}",
    )
    return WholeLowering(name, target, comparison, stages, digests)


def _report_summary(report: Any) -> str:
    if report is None:
        return "  (no report)"
    ran = sum(r.ran for r in report.rows)
    lines = [f"  lowerkit passes: {len(report.rows)} in pipeline, {ran} ran, {len(report.rows) - ran} skipped"]
    lines.append("  10 slowest (lowerkit):")
    for row in sorted(report.rows, key=lambda r: -r.wall_ms)[:10]:
        lines.append(f"    {row.name:<48} {row.wall_ms:9.1f} ms  {row.nodes_before}->{row.nodes_after}")
    return "\n".join(lines)


def summary_table(wholes: list[WholeLowering]) -> str:
    """Markdown: model | target | stock s | lowerkit s | ratio | .pte (medians of the whole lowering)."""
    lines = ["| model | target | stock s | lowerkit s | ratio | .pte |", "|---|---|---:|---:|---:|---|"]
    for w in wholes:
        c = w.comparison
        lines.append(
            f"| {w.name} | {w.target} | {c.baseline.median:.2f} | {c.candidate.median:.2f}"
            f" | {c.ratio:.2f}x | {'same' if w.same_pte else 'DIFFERENT'} |"
        )
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--models", default=",".join(DEFAULT_MODELS))
    parser.add_argument("--targets", default=",".join(DEFAULT_TARGETS))
    parser.add_argument("--json", default=None, help="write all comparisons to this JSON file")
    parser.add_argument("--no-whole", action="store_true", help="skip the whole-lowering comparison")
    parser.add_argument("--no-pipeline", action="store_true", help="skip the pipeline-alone comparison")
    args = parser.parse_args(argv)

    pipelines: list[Comparison] = []
    wholes: list[WholeLowering] = []
    for name in args.models.split(","):
        for target in args.targets.split(","):
            if not args.no_pipeline:
                pipeline, report = bench_pipeline(name, target, args.repeat)
                pipelines.append(pipeline)
                print(pipeline.table())
                print(_report_summary(report), flush=True)
            if not args.no_whole:
                whole = bench_whole(name, target, args.repeat)
                wholes.append(whole)
                print(whole.comparison.table())
                print(whole.table(), flush=True)
    print("\nsummary (median stock / median lowerkit):")
    for c in [*pipelines, *(w.comparison for w in wholes)]:
        print(f"  {c.title:<60} {c.ratio:6.2f}x")
    if wholes:
        print("\nwhole lowering (medians):\n" + summary_table(wholes))
    if args.json:
        payload = [*(c.to_json() for c in pipelines), *(w.to_json() for w in wholes)]
        Path(args.json).write_text(json.dumps(payload, indent=2) + "\n")
    sys.stdout.flush()
    different = [f"{w.name} {w.target}" for w in wholes if not w.same_pte]
    if different:
        print(f"DIFFERENT .pte bytes stock vs lowerkit: {different}", file=sys.stderr)
    return 1 if different else 0


if __name__ == "__main__":
    sys.exit(main())
