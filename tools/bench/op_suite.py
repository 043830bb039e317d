"""Benchmark: ExecuTorch's own operator suite, stock Arm / Core ML flows vs lowerkit's, side by side.

The suite ships in the executorch wheel (``executorch/backends/test/suite/operators``, pytest).
`bench.op_suite_flows` adds lowerkit flows without editing it. For each flow pair
(``arm_tosa_int`` / ``lowerkit_arm_tosa_int``, ``coreml`` / ``lowerkit_coreml``, ...) this runs
the selected cases in fresh pytest processes, stock and lowerkit alternately, ``--repeat``
times, and prints per flow: process wall time (median), the suite's own lowering time summed
over cases (``to_edge_transform_and_lower``, median over repeats) and quantize time, pass /
fail / skip counts, and every case that passes stock but not lowerkit (or the reverse).

The lowerkit Core ML processes get ``--lowerkit-coreml`` (lowerkit's Core ML backend cannot
share a process with ExecuTorch's). Off macOS both Core ML sides stop after ``serialize``:
a Core ML case passes when it quantizes (``coreml_static_int8``), lowers and serializes.

``--shards N`` splits the suite's test files into N groups and runs each group stock, then
lowerkit (then the reverse order for the next group), so a long run sees the same machine load
on both sides (the full 467-case Arm flow is over an hour; a half-and-half run would not).

    python -m bench.op_suite [--flows arm_tosa_int,arm_tosa_fp,coreml,coreml_static_int8] [-k EXPR]
        [--repeat 1] [--shards 1] [--json out.json]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path
from typing import Any

from bench.op_suite_coreml import COREML_FLOWS
from bench.op_suite_flows import MIRRORED

STOCK_TO_LOWERKIT = {stock: lowerkit for lowerkit, stock in MIRRORED.items()}


def suite_dir() -> Path:
    """The operator suite inside the installed executorch wheel."""
    import importlib.util

    spec = importlib.util.find_spec("executorch.backends.test.suite")
    if spec is None or not spec.submodule_search_locations:
        raise SystemExit("executorch's operator suite is not installed (executorch.backends.test.suite)")
    return Path(next(iter(spec.submodule_search_locations))) / "operators"


def shards(count: int) -> list[list[Path]]:
    """The suite's test files in ``count`` groups (round-robin over the sorted names)."""
    files = sorted(suite_dir().glob("test_*.py"))
    if count < 1:
        raise SystemExit("--shards must be at least 1")
    return [group for group in (files[i::count] for i in range(count)) if group]


def run_flow(flow: str, selection: str | None, paths: list[Path]) -> tuple[float, list[dict[str, Any]]]:
    """Run one flow over the selected cases of ``paths`` in a fresh pytest process: (wall seconds, records)."""
    with tempfile.TemporaryDirectory() as tmp:
        record = Path(tmp) / "records.json"
        command = [
            sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-p", "bench.op_suite_flows",
            "--rootdir", str(suite_dir().parent), *map(str, paths), "-m", f"flow_{flow}",
            f"--lowerkit-suite-json={record}",
            "-W", "ignore",
        ]
        if flow in COREML_FLOWS:
            command.append("--lowerkit-coreml")
        if selection:
            command += ["-k", selection]
        start = time.perf_counter()
        # The suite's conftest (one level up) parametrizes the flows; the child imports
        # what this process can (bench, lowerkit), whatever its working folder.
        env = {**os.environ, "PYTHONPATH": os.pathsep.join(p for p in sys.path if p)}
        done = subprocess.run(command, capture_output=True, text=True, cwd=tmp, env=env)
        wall = time.perf_counter() - start
        if not record.exists():
            raise SystemExit(f"{flow}: pytest wrote no records (exit {done.returncode}):\n{done.stdout[-3000:]}\n{done.stderr[-3000:]}")
        return wall, json.loads(record.read_text())


def summarize(runs: list[tuple[float, list[dict[str, Any]]]]) -> dict[str, Any]:
    """Medians over repeats, and the outcome of each case in the first run."""
    records = runs[0][1]
    return {
        "wall_s": statistics.median(w for w, _ in runs),
        "lower_s": statistics.median(sum(r["lower_s"] for r in rs) for _, rs in runs),
        "quantize_s": statistics.median(sum(r["quantize_s"] for r in rs) for _, rs in runs),
        "outcomes": dict(Counter(r["outcome"] for r in records)),
        "cases": {r["case"]: r["outcome"] for r in records},
        "lower_s_by_case": {r["case"]: r["lower_s"] for r in records},
        "errors_by_case": {r["case"]: r["errors"] for r in records if r.get("errors")},
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--flows", default="arm_tosa_int", help="Stock flows, comma-separated: " + ", ".join(STOCK_TO_LOWERKIT))
    parser.add_argument("-k", dest="selection", default=None, help="pytest -k expression selecting cases.")
    parser.add_argument("--repeat", type=int, default=1)
    parser.add_argument("--shards", type=int, default=1, help="Split the files into N groups, alternating sides per group.")
    parser.add_argument("--json", type=Path, default=None)
    args = parser.parse_args(argv)
    groups = shards(args.shards)
    results: dict[str, Any] = {}
    regressions = 0
    for stock in args.flows.split(","):
        if stock not in STOCK_TO_LOWERKIT:
            raise SystemExit(f"no lowerkit flow mirrors '{stock}'; choose from {', '.join(STOCK_TO_LOWERKIT)}")
        lowerkit = STOCK_TO_LOWERKIT[stock]
        runs: dict[str, list[tuple[float, list[dict[str, Any]]]]] = {stock: [], lowerkit: []}
        for _ in range(args.repeat):
            totals: dict[str, tuple[float, list[dict[str, Any]]]] = {stock: (0.0, []), lowerkit: (0.0, [])}
            for index, group in enumerate(groups):
                for flow in (stock, lowerkit) if index % 2 == 0 else (lowerkit, stock):
                    wall, records = run_flow(flow, args.selection, group)
                    totals[flow] = (totals[flow][0] + wall, totals[flow][1] + records)
                    print(f"  {flow} [{index + 1}/{len(groups)}]: {wall:.0f} s, {len(records)} cases", file=sys.stderr)
            for flow, total in totals.items():
                if not total[1]:
                    raise SystemExit(f"{flow}: no case selected")
                runs[flow].append(total)
        a, b = summarize(runs[stock]), summarize(runs[lowerkit])
        only_stock = sorted(c for c, o in a["cases"].items() if o == "passed" and b["cases"].get(c) != "passed")
        only_lowerkit = sorted(c for c, o in b["cases"].items() if o == "passed" and a["cases"].get(c) != "passed")
        regressions += len(only_stock)
        results[stock] = {"stock": a, "lowerkit": b, "pass_stock_not_lowerkit": only_stock, "pass_lowerkit_not_stock": only_lowerkit}
        print(f"\n{stock} vs {lowerkit}: {len(a['cases'])} cases, repeat {args.repeat}")
        print(f"  {'':<10} {'wall s':>8} {'lower s':>8} {'quant s':>8}  outcomes")
        for label, s in (("stock", a), ("lowerkit", b)):
            print(f"  {label:<10} {s['wall_s']:>8.1f} {s['lower_s']:>8.1f} {s['quantize_s']:>8.1f}  {s['outcomes']}")
        ratio = a["lower_s"] / b["lower_s"] if b["lower_s"] else float("nan")
        print(f"  lowering time summed: lowerkit = {1 / ratio:.2f} of stock ({ratio:.2f}x); wall {a['wall_s'] / b['wall_s']:.2f}x")
        print(f"  pass stock, not lowerkit: {only_stock or 'none'}")
        print(f"  pass lowerkit, not stock: {only_lowerkit or 'none'}")
    if args.json:
        args.json.write_text(json.dumps(results, indent=1) + "\n")
    return 1 if regressions else 0


if __name__ == "__main__":
    sys.exit(main())
