"""Benchmark: real models (`bench.corpus`), stock ExecuTorch vs lowerkit, side by side, whole flow.

For each model x target, each side of `bench.realworld_flows` (``stock``: ExecuTorch's public-API
flow; ``dropin``: the same code inside lowerkit's accelerators; ``api``: ``lower_to_arm`` /
``lower_to_coreml``) runs in a fresh process per run, ``OMP_NUM_THREADS=1`` and
``PYTHONHASHSEED=0`` (`HASH_SEED`: stock ExecuTorch's own Arm ``.pte`` for ``hf:bert_tiny`` →
TOSA INT depends on Python's string-hash seed — two stock processes with different seeds write
different bytes — so the sides are compared under one seed, as a user's one process is). The worker pays its
imports and builds the model before the clock starts; the clock covers export → quantize →
``to_edge_transform_and_lower`` → ``to_executorch``. Sides alternate (stock, dropin, api, then the
reverse), ``--repeat`` rounds; medians. Recorded per run: pass / fail (the error's first line, and its root cause's),
seconds per stage, peak RSS (``getrusage``), the 1-minute load average at its start, on lowerkit's
sides every ``run_decompositions`` that took torch's whole-program re-trace and why, on the drop-in
side each stage's floor (`bench.floors`: measured around and after the timed flow); per case the
``.pte`` sha256 (Arm: must be identical on every side) or the canonical Core ML payload digest
(ExecuTorch writes a random identifier into each payload). A case that passes on one side only,
or whose bytes differ, is printed loudly, flagged in the JSON and makes the exit code 1, but for
a case stock fails where lowerkit has a documented fix (`DOCUMENTED_FIXES`): flagged, exit code 0.

``--shards N`` splits the cases into N groups (round-robin) and ``--shard K`` runs only group K
(1-based), so a long run can be spread over invocations or machines and merged by `bench.report`;
the JSON is rewritten after every case, so an interrupted run keeps what it measured.

    python -m bench.realworld [--models tv:mobilenet_v2,hf:bert_tiny] [--targets TOSA-1.0+INT,coreml-fp16]
        [--sides stock,dropin,api] [--repeat 1] [--shards 1 --shard 1] [--json OUT] [--list]
    python -m bench.report OUT.json --write docs/benchmarks.md        # the Markdown table
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import platform
import resource
import statistics
import subprocess
import sys
import tempfile
import time
import traceback
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

from bench.corpus import CORPUS, case
from bench.floor_table import floor_line
from bench.floors import FloorProbe
from bench.realworld_flows import COREML_TARGETS, SIDES, TARGETS, Lowered

DEFAULT_MODELS = ("tv:mobilenet_v2", "tv:resnet18", "et:lstm", "hf:bert_tiny")
DEFAULT_TARGETS = ("TOSA-1.0+INT", "coreml-fp16")
#: Stock failures lowerkit fixes on purpose (arm-passes README, "Where stock fails: documented
#: fixes"): the fix (``module:NAME``) -> the text of the error stock raises. A case that passes on
#: lowerkit's sides only, stock failing with that text, is a documented fix, not a lost case.
DOCUMENTED_FIXES = {
    "lowerkit.arm_passes.upstream_fixes:SCALAR_OF_A_WEIGHT": "'Parameter' object has no attribute 'to_tensor'",
}


def documented_fix(error: str | None) -> str | None:
    """The documented fix (`DOCUMENTED_FIXES`) whose stock failure `error` is, or None."""
    return next((fix for fix, text in DOCUMENTED_FIXES.items() if error and text in error), None)


#: How a side's error starts when its worker died without a record, and when it was killed for
#: running past ``--timeout`` (a bound, not a failure).
WORKER_DIED = "worker died:"
TIMEOUT_ERROR = f"{WORKER_DIED} timeout after"


def lost(result: dict[str, Any]) -> bool:
    """True when a summarized case lost something: bytes differ, or a side alone fails without a
    documented fix for stock's failure and not only by running past the timeout (the exit code
    counts these)."""
    failed = set(result["sides"]) - set(result["passed_only_on"])
    timed_out = failed <= set(result.get("timed_out", []))  # stopped by the bound, not failing
    return result["same"] is False or (bool(result["passed_only_on"]) and not result.get("documented_fix") and not timed_out)


def first_line(error: BaseException) -> str:
    """``Type: first line of the message``, and the same of the error's root cause when it wraps
    one (ExecuTorch's pass manager names the failing pass; the exception it chains, the problem)."""
    cause = root_cause(error)
    if cause is error:
        return _type_and_line(error)
    return f"{_type_and_line(error)} (caused by {_type_and_line(cause)})"


def root_cause(error: BaseException) -> BaseException:
    """The innermost exception of `error`'s ``__cause__`` / ``__context__`` chain."""
    seen = {id(error)}
    while True:
        inner = error.__cause__ or (None if error.__suppress_context__ else error.__context__)
        if inner is None or id(inner) in seen:
            return error
        seen.add(id(inner))
        error = inner


def _type_and_line(error: BaseException) -> str:
    text = str(error).strip().splitlines()
    return f"{type(error).__name__}: {text[0][:300]}" if text else type(error).__name__


@contextlib.contextmanager
def _fallbacks_recorded(side: str, record: dict[str, Any]) -> Iterator[None]:
    """On lowerkit's sides, record why any ``run_decompositions`` took the whole re-trace."""
    if side == "stock":
        yield
        return
    from lowerkit.pass_infra import decomposition_fallbacks

    with decomposition_fallbacks() as fallbacks:
        yield
    record["decomposition_fallbacks"] = [f"{f.reason} ({f.nodes} nodes)" for f in fallbacks]


def worker(side: str, model_name: str, target: str, out: Path) -> None:
    """Lower one case one side's way in this (fresh) process; write its record to `out` as JSON.

    On the drop-in side, also the stage floors (`bench.floors`): timed around the flow, re-run after it.
    """
    probe = FloorProbe(coreml=target in COREML_TARGETS) if side == "dropin" else None

    def prepare(record: dict[str, Any]) -> Callable[[], Lowered]:
        from bench.corpus import load
        from bench.realworld_flows import lower, preimport

        preimport(side, target in COREML_TARGETS)
        record["imports_s"] = time.perf_counter() - start
        mark = time.perf_counter()
        model = load(model_name)
        record["build_s"] = time.perf_counter() - mark
        if probe is not None:
            probe.about(model.module, model.example_inputs, model.calibration)
        return lambda: lower(side, model.module, model.example_inputs, target, model.calibration)

    start = time.perf_counter()
    write_record(side, model_name, target, out, prepare, probe)


def write_record(
    side: str, model_name: str, target: str, out: Path, prepare: Callable[[dict[str, Any]], Callable[[], Lowered]],
    probe: FloorProbe | None = None,
) -> None:
    """`prepare` (imports, the model; it may note their seconds in the record) off the clock, then the
    lowering it returns on the clock (its progress output swallowed, on lowerkit's sides every
    whole-program re-trace recorded); the record, a failure included, written to `out` as JSON.

    With a `probe`, its hooks time the floor calls during the lowering and its floors are measured
    after it, once the record's seconds and peak RSS are taken (a floor that fails: ``floor_error``).
    """
    import io
    import logging

    logging.disable(logging.WARNING)
    record: dict[str, Any] = {"side": side, "model": model_name, "target": target, "ok": False}
    lowered: Lowered | None = None
    try:
        lower = prepare(record)
        with probe.hooks() if probe is not None else contextlib.nullcontext():
            mark = time.perf_counter()
            with contextlib.redirect_stdout(io.StringIO()), _fallbacks_recorded(side, record):  # Vela and coremltools print progress
                lowered = lower()
            record["seconds"] = time.perf_counter() - mark
        record.update(
            ok=True, stages=lowered.stages, pte_sha256=lowered.pte_sha256, pte_bytes=len(lowered.pte),
            payload_digests=lowered.payload_digests(), delegates=len(lowered.payloads),
        )  # fmt: skip
    except Exception as error:  # recorded, not raised: a failure is a result
        record["error"] = first_line(error)
        record["traceback"] = traceback.format_exc()[-3000:]
    record["peak_rss_mb"] = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    if probe is not None and lowered is not None and record["ok"]:
        try:
            with contextlib.redirect_stdout(io.StringIO()):
                record.update(probe.measure(lowered))
        except Exception as error:  # the lowering's record stands without floors
            record["floor_error"] = first_line(error)
    out.write_text(json.dumps(record))


#: Python's string-hash seed of every worker (see the module docstring).
HASH_SEED = "0"


def run_side(side: str, model_name: str, target: str, timeout: float, runner: str = "bench.realworld") -> dict[str, Any]:
    """One fresh worker process of `runner` (a module with ``--worker``); its record, with the load average at its start."""
    load = os.getloadavg()[0]
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp) / "record.json"
        env = {**os.environ, "OMP_NUM_THREADS": "1", "PYTHONHASHSEED": HASH_SEED, "PYTHONPATH": os.pathsep.join(p for p in sys.path if p)}
        command = [sys.executable, "-m", runner, "--worker", side, model_name, target, str(out)]
        wall = time.perf_counter()
        try:
            done = subprocess.run(command, capture_output=True, text=True, env=env, timeout=timeout, check=False)
            last_line = (done.stderr.strip().splitlines() or [f"exit {done.returncode}"])[-1]
            error = f"{WORKER_DIED} {last_line}"
        except subprocess.TimeoutExpired:
            error = f"{TIMEOUT_ERROR} {timeout:.0f} s"
        wall = time.perf_counter() - wall
        record: dict[str, Any] = (
            json.loads(out.read_text()) if out.exists()
            else {"side": side, "model": model_name, "target": target, "ok": False, "error": error}
        )  # fmt: skip
    record.update(load_at_start=load, process_s=wall)
    return record


def summarize(
    model_name: str, target: str, runs: list[dict[str, Any]], sides: list[str], *, group: str | None = None,
    coreml: bool | None = None,
) -> dict[str, Any]:
    """Per side: medians, pass / fail, peak RSS; across sides: same bytes, ratios, one-sided failures.

    `group` defaults to the corpus case's, `coreml` (payloads compared canonically) to whether
    `target` is a Core ML target of `bench.realworld_flows`.
    """
    per_side: dict[str, Any] = {}
    for side in sides:
        mine = [r for r in runs if r["side"] == side]
        ok = [r for r in mine if r["ok"]]
        per_side[side] = {
            "ok": bool(ok) and len(ok) == len(mine),
            "error": next((r["error"] for r in mine if not r["ok"]), None),
            "median_s": statistics.median(r["seconds"] for r in ok) if ok else None,
            "seconds": [r["seconds"] for r in ok],
            "stages": ok[0]["stages"] if ok else {},
            "peak_rss_mb": max((r["peak_rss_mb"] for r in mine if "peak_rss_mb" in r), default=None),
            "pte_sha256": sorted({r["pte_sha256"] for r in ok}),
            "payload_digests": sorted({json.dumps(r["payload_digests"]) for r in ok}),
            "delegates": ok[0]["delegates"] if ok else None,
            "pte_bytes": ok[0]["pte_bytes"] if ok else None,
            "decomposition_fallbacks": sorted({f for r in ok for f in r.get("decomposition_fallbacks", [])}),
        }
        if ok and "floors" in ok[0]:  # the drop-in side's, from the run `stages` come from
            per_side[side].update(floors=ok[0]["floors"], floor_parts=ok[0]["floor_parts"])
        if any("floor_error" in r for r in ok):
            per_side[side]["floor_error"] = next(r["floor_error"] for r in ok if "floor_error" in r)
    passed = [s for s in sides if per_side[s]["ok"]]
    coreml = target in COREML_TARGETS if coreml is None else coreml
    key = "payload_digests" if coreml else "pte_sha256"
    digests = {d for s in passed for d in per_side[s][key]}
    stock = per_side.get("stock", {}).get("median_s")
    ratios = {
        s: stock / per_side[s]["median_s"] for s in passed if s != "stock" and stock and per_side[s]["median_s"]
    }
    one_sided = sorted(passed) if passed and len(passed) != len(sides) else []
    stock_error = per_side.get("stock", {}).get("error")
    return {
        "model": model_name, "target": target, "group": group or case(model_name).group, "sides": per_side,
        "compared": "canonical Core ML payload" if coreml else ".pte sha256",
        "same": len(digests) == 1 if len(passed) > 1 else None,
        "ratios": ratios, "passed_only_on": one_sided,
        "timed_out": sorted(s for s in sides if (per_side[s]["error"] or "").startswith(TIMEOUT_ERROR)),
        "documented_fix": documented_fix(stock_error) if one_sided and "stock" not in passed else None,
        "load_at_start": [r["load_at_start"] for r in runs],
    }  # fmt: skip


def print_case(result: dict[str, Any]) -> None:
    """One line per side, then the verdict (loud when bytes differ or a side alone failed)."""
    print(f"{result['model']} {result['target']}:", flush=True)
    for side, s in result["sides"].items():
        median = f"{s['median_s']:.1f} s" if s["median_s"] is not None else "FAILED"
        ratio = f" ({result['ratios'][side]:.2f}x)" if side in result["ratios"] else ""
        error = f"  {s['error']}" if s["error"] else ""
        rss = f"{s['peak_rss_mb']:.0f} MB" if s["peak_rss_mb"] else "-"
        print(f"  {side:<7} {median:>10}{ratio:<10} peak {rss:>8}{error}", flush=True)
    if result["same"] is False:
        print(f"  !!! DIFFERENT {result['compared']} between sides", flush=True)
    elif result["same"]:
        print(f"  same {result['compared']} on every side", flush=True)
    if result["passed_only_on"] and result.get("documented_fix"):
        print(f"  passes only on {result['passed_only_on']}: stock fails where lowerkit has a documented fix, "
              f"{result['documented_fix']}", flush=True)  # fmt: skip
    elif result["passed_only_on"]:
        print(f"  !!! passes only on {result['passed_only_on']}", flush=True)
    for side, s in result["sides"].items():
        if line := floor_line(s):
            print(f"  {side}: {line}", flush=True)
        if s.get("floor_error"):
            print(f"  {side}: floors failed: {s['floor_error']}", flush=True)
        for fallback in s.get("decomposition_fallbacks", []):
            print(f"  {side}: run_decompositions re-traced the whole program: {fallback}", flush=True)


def lowerkit_commit() -> str | None:
    """The lowerkit checkout's commit (``+dirty`` with uncommitted changes but the benchmark's own
    results, which a run writes as it goes), None outside git."""
    here = Path(__file__).resolve().parent
    changes = ["git", "status", "--porcelain", "--untracked-files=no", "--", ":/", ":(exclude,top)tools/bench/results"]
    try:
        commit = subprocess.run(["git", "rev-parse", "--short=12", "HEAD"], cwd=here, capture_output=True, text=True, check=True)
        dirty = subprocess.run(changes, cwd=here, capture_output=True, text=True, check=True)
    except (OSError, subprocess.CalledProcessError):
        return None
    return commit.stdout.strip() + ("+dirty" if dirty.stdout.strip() else "")


def machine() -> dict[str, Any]:
    """Where and when: host, CPUs, load averages, library versions, lowerkit's commit."""
    import importlib.metadata as metadata

    versions: dict[str, str | None] = {}
    for name in ("torch", "executorch", "coremltools", "torchao", "torchvision", "transformers"):
        try:
            versions[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            versions[name] = None
    return {
        "host": platform.node(), "cpus": os.cpu_count(), "loadavg_at_start": list(os.getloadavg()),
        "started": time.strftime("%Y-%m-%d %H:%M:%S %Z"), "python": platform.python_version(),
        "niceness": os.nice(0), "versions": versions, "lowerkit_commit": lowerkit_commit(),
    }  # fmt: skip


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--worker", nargs=4, metavar=("SIDE", "MODEL", "TARGET", "OUT"), help=argparse.SUPPRESS)
    parser.add_argument("--models", default=",".join(DEFAULT_MODELS), help="corpus names, comma-separated")
    parser.add_argument("--targets", default=",".join(DEFAULT_TARGETS), help=", ".join(TARGETS))
    parser.add_argument("--sides", default=",".join(SIDES), help="stock first; any of " + ", ".join(SIDES))
    parser.add_argument("--repeat", type=int, default=1)
    parser.add_argument("--shards", type=int, default=1, help="split the cases into N groups")
    parser.add_argument("--shard", type=int, default=0, help="run only group K of --shards (1-based; 0: all)")
    parser.add_argument("--timeout", type=float, default=1800.0, help="seconds per worker process")
    parser.add_argument("--json", type=Path, default=None)
    parser.add_argument("--list", action="store_true", help="print the corpus and exit")
    args = parser.parse_args(argv)
    if args.worker:
        side, model_name, target, out = args.worker
        worker(side, model_name, target, Path(out))
        return 0
    if args.list:
        for entry in CORPUS:
            print(f"{entry.name:<28} {entry.group:<40} {entry.unavailable or entry.note}")
        return 0
    models = [m for m in args.models.split(",") if m]
    for name in models:
        if case(name).unavailable:
            raise SystemExit(f"{name} is unavailable here: {case(name).unavailable}")
    targets = [t for t in args.targets.split(",") if t]
    unknown = [t for t in targets if t not in TARGETS]
    sides = [s for s in args.sides.split(",") if s]
    if unknown or any(s not in SIDES for s in sides) or args.repeat < 1 or not 0 <= args.shard <= args.shards:
        raise SystemExit(f"bad --targets / --sides / --repeat / --shard (targets: {', '.join(TARGETS)})")
    cases = [(m, t) for m in models for t in targets]
    groups = [cases[i :: args.shards] for i in range(args.shards)]
    chosen = [c for i, g in enumerate(groups, 1) if args.shard in (0, i) for c in g]
    return run_cases(
        chosen, sides, repeat=args.repeat, timeout=args.timeout, json_path=args.json,
        argv=sys.argv[1:] if argv is None else argv, runner="bench.realworld",
        summary=lambda model_name, target, runs: summarize(model_name, target, runs, sides),
    )  # fmt: skip


def run_cases(
    cases: list[tuple[str, str]], sides: list[str], *, repeat: int, timeout: float, json_path: Path | None,
    argv: list[str], runner: str, summary: Callable[[str, str, list[dict[str, Any]]], dict[str, Any]],
) -> int:
    """Each (model, target) of `cases`, every side in a fresh `runner` worker per round (sides
    alternating), summarized by `summary`, printed, the JSON rewritten after each case; exit code 1
    when a case `lost` something (bytes differ, or a side alone failed with no documented fix)."""
    report: dict[str, Any] = {"machine": machine(), "runner": runner, "argv": argv, "cases": []}
    print(f"load average at start: {report['machine']['loadavg_at_start']}, {len(cases)} cases", flush=True)
    failures = 0
    for model_name, target in cases:
        runs: list[dict[str, Any]] = []
        for round_index in range(repeat):
            for side in sides if round_index % 2 == 0 else list(reversed(sides)):
                record = run_side(side, model_name, target, timeout, runner)
                runs.append(record)
                status = f"{record['seconds']:.1f} s" if record["ok"] else f"FAILED {record['error']}"
                print(f"  [{round_index + 1}/{repeat}] {model_name} {target} {side}: {status}",
                      file=sys.stderr, flush=True)  # fmt: skip
        result = summary(model_name, target, runs)
        report["cases"].append(result)
        print_case(result)
        failures += lost(result)
        if json_path:
            json_path.parent.mkdir(parents=True, exist_ok=True)
            json_path.write_text(json.dumps(report, indent=1) + "\n")
    report["machine"]["loadavg_at_end"] = list(os.getloadavg())
    if json_path:
        json_path.write_text(json.dumps(report, indent=1) + "\n")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
