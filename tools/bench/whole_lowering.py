"""Benchmark: stock ExecuTorch vs ``lowerkit.pass_infra.accelerated_lowering()``, XNNPACK, whole lowering.

Each run is a fresh process (imports and ExecuTorch's one-time work, e.g. XNNPACK's pattern
graphs, count as a user pays them) that exports a zoo model, runs
``to_edge_transform_and_lower(ep, partitioner=[XnnpackPartitioner()])`` and ``to_executorch()``,
stock or inside ``accelerated_lowering()``. Runs alternate stock / lowerkit; per model it prints
min / median / max process wall time and the median ratio, the median of each stage and of
the lowering (``to_edge_transform_and_lower`` + ``to_executorch``, the goal's measure), and
checks that every run of both sides wrote the same ``.pte`` bytes (sha256).

    python -m bench.whole_lowering [--repeat 3] [--models conv_linear,resnet8] [--json out.json]
"""

from __future__ import annotations

import argparse
import hashlib
import json
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from bench.harness import Comparison, Contender, compare, write_json

ZOO_CNNS = ("conv_linear", "cnn9_layernorm", "resnet8", "mobilenet_v1_025", "ds_cnn")
STAGES = ("imports", "export", "to_edge_transform_and_lower", "to_executorch")


def worker(side: str, model_name: str, record: Path) -> None:
    """Lower one zoo model to XNNPACK (`side`: stock or lowerkit); append stage times to `record`."""
    start = time.perf_counter()
    import contextlib

    import torch
    from executorch.backends.xnnpack.partition.xnnpack_partitioner import XnnpackPartitioner
    from executorch.exir import to_edge_transform_and_lower

    from lowerkit import zoo
    from lowerkit.pass_infra import accelerated_lowering

    stages: dict[str, float] = {}
    mark = time.perf_counter()
    stages["imports"] = mark - start
    model = zoo.get(model_name)
    program = torch.export.export(model.module().eval(), model.example_inputs())
    stages["export"] = time.perf_counter() - mark
    scope = accelerated_lowering() if side == "lowerkit" else contextlib.nullcontext()
    with scope:
        mark = time.perf_counter()
        edge = to_edge_transform_and_lower(program, partitioner=[XnnpackPartitioner()])
        stages["to_edge_transform_and_lower"] = time.perf_counter() - mark
        mark = time.perf_counter()
        pte = bytes(edge.to_executorch().buffer)
        stages["to_executorch"] = time.perf_counter() - mark
    entry = {
        "side": side,
        "model": model_name,
        "stages": stages,
        "sha256": hashlib.sha256(pte).hexdigest(),
        "bytes": len(pte),
    }
    with record.open("a") as out:
        out.write(json.dumps(entry) + "\n")


def bench_model(name: str, repeat: int, record: Path) -> tuple[Comparison, list[dict[str, Any]]]:
    """Time stock vs lowerkit on `name` in fresh processes; return the comparison and run records."""
    record.write_text("")

    def command(side: str) -> list[str]:
        return [sys.executable, "-m", "bench.whole_lowering", "--worker", side, name, str(record)]

    comparison = compare(
        Contender("stock ExecuTorch", command("stock")),
        Contender("lowerkit accelerated_lowering", command("lowerkit")),
        repeat=repeat,
        title=f"{name}: XNNPACK export + to_edge_transform_and_lower + to_executorch (fresh process)",
    )
    entries = [json.loads(line) for line in record.read_text().splitlines() if line]
    return comparison, entries


LOWERING = ("to_edge_transform_and_lower", "to_executorch")


def stage_medians(entries: list[dict[str, Any]], stages: tuple[str, ...]) -> dict[str, float]:
    """Per side, the median over runs of the seconds spent in `stages` (summed per run)."""
    return {
        side: statistics.median(
            sum(e["stages"][s] for s in stages) for e in entries if e["side"] == side
        )
        for side in ("stock", "lowerkit")
    }


def stage_table(entries: list[dict[str, Any]]) -> tuple[str, float]:
    """Median seconds per stage and side with ratios; and the lowering (the two calls) ratio."""
    lines = [f"  {'stage (median s)':<30} {'stock':>9} {'lowerkit':>9} {'ratio':>7}"]
    rows = [*((stage, (stage,)) for stage in STAGES), ("lowering (the two calls)", LOWERING)]
    ratio = 0.0
    for label, stages in rows:
        medians = stage_medians(entries, stages)
        ratio = medians["stock"] / medians["lowerkit"] if medians["lowerkit"] else float("inf")
        lines.append(
            f"  {label:<30} {medians['stock']:>9.2f} {medians['lowerkit']:>9.2f} {ratio:>6.2f}x"
        )
    return "\n".join(lines), ratio


def same_bytes(entries: list[dict[str, Any]]) -> str:
    """'same .pte (N bytes)' when every run wrote identical bytes; raise otherwise."""
    digests = {(e["side"], e["sha256"]) for e in entries}
    if len({digest for _, digest in digests}) != 1:
        raise SystemExit(f"different .pte bytes: {sorted(digests)}")
    return f"  same .pte bytes in all {len(entries)} runs ({entries[0]['bytes']} bytes)"


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--worker", nargs=3, metavar=("SIDE", "MODEL", "RECORD"))
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--models", default=",".join(ZOO_CNNS))
    parser.add_argument("--json", help="write every run's time and the ratios here")
    args = parser.parse_args(argv)
    if args.worker:
        side, model, record = args.worker
        worker(side, model, Path(record))
        return
    comparisons = []
    summary = []
    with tempfile.TemporaryDirectory() as tmp:
        for name in args.models.split(","):
            comparison, entries = bench_model(name, args.repeat, Path(tmp) / f"{name}.jsonl")
            comparisons.append(comparison)
            print(comparison.table())
            table, lowering_ratio = stage_table(entries)
            print(table)
            print(same_bytes(entries), flush=True)
            summary.append(
                f"  {name:<20} {comparison.ratio:>8.2f}x {lowering_ratio:>10.2f}x"
            )
    print(f"median ratio stock / lowerkit:\n  {'model':<20} {'process':>9} {'lowering':>11}")
    print("\n".join(summary))
    if args.json:
        write_json(comparisons, args.json)


if __name__ == "__main__":
    main()
