"""Benchmark: ExecuTorch's stock Arm backend pipeline vs lowerkit.arm_passes, side by side.

For each model x target: (1) the backend pass pipeline alone (ArmPassManager vs
FastArmPassManager on deep copies of the same partitioned edge program, copies made outside
the timing), (2) the whole lowering (quantize + partition + lower + serialize, lower_to_arm
with stock=True vs default). Runs alternate stock / lowerkit; medians and their ratio are
printed, with the passes lowerkit ran/skipped and its 10 slowest passes.

    python -m bench.arm [--repeat 3] [--models cnn9_layernorm,mobilenet_v1_025]
                        [--targets TOSA-1.0+INT,ethos-u55-128] [--json out.json] [--no-whole]
"""

from __future__ import annotations

import argparse
import contextlib
import copy
import io
import sys
from collections.abc import Callable
from typing import Any

from bench.harness import Comparison, Contender, compare, write_json

DEFAULT_MODELS = ("cnn9_layernorm", "mobilenet_v1_025")
DEFAULT_TARGETS = ("TOSA-1.0+INT", "ethos-u55-128")


def _backend_inputs(name: str, target: str) -> list[tuple[Any, Any]]:
    from lowerkit import zoo
    from lowerkit.arm_passes import _upstream, lower_to_arm

    model = zoo.get(name)
    sink: list[tuple[Any, Any]] = []
    with _upstream.capture_backend_inputs(sink), contextlib.redirect_stdout(io.StringIO()):
        lower_to_arm(
            model.module(), model.example_inputs(), target,
            calibration=model.calibration(4, 0), stock=True,
        )
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


def bench_whole(name: str, target: str, repeat: int) -> Comparison:
    from lowerkit import zoo
    from lowerkit.arm_passes import lower_to_arm

    model = zoo.get(name)
    calibration = model.calibration(4, 0)

    def lower(stock: bool) -> Callable[[], None]:
        def run() -> None:
            lower_to_arm(
                model.module(), model.example_inputs(), target,
                calibration=calibration, stock=stock,
            )

        return run

    return compare(
        Contender("stock lowering", lower(True)),
        Contender("lowerkit lower_to_arm", lower(False)),
        repeat=repeat,
        title=f"whole lowering: {name} {target}",
    )


def _report_summary(report: Any) -> str:
    if report is None:
        return "  (no report)"
    ran = sum(r.ran for r in report.rows)
    lines = [f"  lowerkit passes: {len(report.rows)} in pipeline, {ran} ran, {len(report.rows) - ran} skipped"]
    lines.append("  10 slowest (lowerkit):")
    for row in sorted(report.rows, key=lambda r: -r.wall_ms)[:10]:
        lines.append(f"    {row.name:<48} {row.wall_ms:9.1f} ms  {row.nodes_before}->{row.nodes_after}")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--models", default=",".join(DEFAULT_MODELS))
    parser.add_argument("--targets", default=",".join(DEFAULT_TARGETS))
    parser.add_argument("--json", default=None, help="write all comparisons to this JSON file")
    parser.add_argument("--no-whole", action="store_true", help="skip the whole-lowering comparison")
    args = parser.parse_args(argv)

    comparisons: list[Comparison] = []
    for name in args.models.split(","):
        for target in args.targets.split(","):
            pipeline, report = bench_pipeline(name, target, args.repeat)
            comparisons.append(pipeline)
            print(pipeline.table())
            print(_report_summary(report), flush=True)
            if not args.no_whole:
                whole = bench_whole(name, target, args.repeat)
                comparisons.append(whole)
                print(whole.table(), flush=True)
    print("\nsummary (median stock / median lowerkit):")
    for c in comparisons:
        print(f"  {c.title:<60} {c.ratio:6.2f}x")
    if args.json:
        write_json(comparisons, args.json)
    sys.stdout.flush()


if __name__ == "__main__":
    main()
