"""Benchmark: ExecuTorch's CoreMLQuantizer vs lowerkit's, prepare_pt2e + convert_pt2e.

Each quantizer runs in a fresh subprocess (so lowerkit's first call pays its full
cold cost: no pattern is cached yet) doing five prepare_pt2e + calibrate +
convert_pt2e calls, alternating a conv model and a linear model. Printed: each
call's seconds, the first call, the median of the later calls, and the ratios
upstream / lowerkit.

    python -m bench.coreml_quantize [--calls 5] [--json out.json]
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
from pathlib import Path
from typing import Any

CONTENDERS = ("executorch", "lowerkit")


def _models() -> dict[str, tuple[Any, tuple[Any, ...]]]:
    import torch
    from torch import nn

    torch.manual_seed(0)
    conv = nn.Sequential(
        nn.Conv2d(3, 16, 3, padding=1),
        nn.ReLU(),
        nn.Conv2d(16, 16, 3, padding=1),
        nn.ReLU(),
        nn.AdaptiveAvgPool2d(1),
        nn.Flatten(),
        nn.Linear(16, 10),
    ).eval()
    linear = nn.Sequential(
        nn.Linear(64, 128), nn.ReLU(), nn.Linear(128, 128), nn.ReLU(), nn.Linear(128, 10)
    ).eval()
    return {
        "conv": (conv, (torch.randn(1, 3, 32, 32),)),
        "linear": (linear, (torch.randn(4, 64),)),
    }


def worker(contender: str, calls: int) -> dict[str, Any]:
    """Time ``calls`` prepare+convert calls in this (fresh) process."""
    start = time.perf_counter()
    import torch
    from coremltools.optimize.torch.quantization import LinearQuantizerConfig
    from torchao.quantization.pt2e.quantize_pt2e import convert_pt2e, prepare_pt2e

    if contender == "executorch":
        from executorch.backends.apple.coreml.quantizer import CoreMLQuantizer
    else:
        from lowerkit.coreml_quantizer import CoreMLQuantizer
    import_seconds = time.perf_counter() - start

    models = _models()
    names = list(models)
    results: list[dict[str, Any]] = []
    for call in range(calls):
        name = names[call % len(names)]
        module, inputs = models[name]
        exported = torch.export.export(module, inputs).module()  # not timed
        start = time.perf_counter()
        prepared = prepare_pt2e(exported, CoreMLQuantizer(LinearQuantizerConfig()))
        prepared(*inputs)
        convert_pt2e(prepared)
        results.append({"model": name, "seconds": time.perf_counter() - start})
    out: dict[str, Any] = {
        "contender": contender,
        "import_seconds": import_seconds,
        "calls": results,
    }
    if contender == "lowerkit":
        from lowerkit.coreml_quantizer import pattern_cache

        stats = pattern_cache.stats()
        out["pattern_cache"] = {
            "builds": stats.builds,
            "hits": stats.hits,
            "build_seconds": stats.build_seconds,
        }
    return out


def run_fresh(contender: str, calls: int) -> dict[str, Any]:
    """Run `worker` in a fresh Python process and return its result."""
    with tempfile.TemporaryDirectory() as tmp:
        result_path = Path(tmp) / "result.json"
        command = [
            sys.executable,
            "-m",
            "bench.coreml_quantize",
            "--worker",
            contender,
            "--calls",
            str(calls),
            "--result",
            str(result_path),
        ]
        done = subprocess.run(command, capture_output=True, text=True, env=dict(os.environ))
        if done.returncode != 0:
            raise RuntimeError(f"{contender} worker failed:\n{done.stderr[-4000:]}")
        data: dict[str, Any] = json.loads(result_path.read_text())
        return data


def report(results: dict[str, dict[str, Any]]) -> str:
    """A table of per-call seconds, first call, median of later calls, and ratios."""
    lines = ["prepare_pt2e + calibrate + convert_pt2e, fresh process per contender"]
    header = (
        f"  {'call':<6}{'model':<8}" + "".join(f"{c:>14}" for c in CONTENDERS) + f"{'ratio':>10}"
    )
    lines.append(header)
    calls = len(results[CONTENDERS[0]]["calls"])
    for index in range(calls):
        row = [results[c]["calls"][index]["seconds"] for c in CONTENDERS]
        model = results[CONTENDERS[0]]["calls"][index]["model"]
        lines.append(
            f"  {index + 1:<6}{model:<8}"
            + "".join(f"{s:>14.4f}" for s in row)
            + f"{row[0] / row[1]:>9.0f}x"
        )
    summary: dict[str, tuple[float, float]] = {}
    for contender in CONTENDERS:
        seconds = [c["seconds"] for c in results[contender]["calls"]]
        summary[contender] = (
            seconds[0],
            statistics.median(seconds[1:]) if len(seconds) > 1 else float("nan"),
        )
    up, lk = summary["executorch"], summary["lowerkit"]
    lines.append(
        f"  first call:          executorch {up[0]:.3f} s, lowerkit {lk[0]:.3f} s, ratio {up[0] / lk[0]:.0f}x"
    )
    lines.append(
        f"  later calls median:  executorch {up[1]:.3f} s, lowerkit {lk[1]:.3f} s, ratio {up[1] / lk[1]:.0f}x"
    )
    lines.append(
        "  imports: " + ", ".join(f"{c} {results[c]['import_seconds']:.1f} s" for c in CONTENDERS)
    )
    if "pattern_cache" in results["lowerkit"]:
        stats = results["lowerkit"]["pattern_cache"]
        lines.append(
            f"  lowerkit pattern_cache: {stats['builds']} builds ({stats['build_seconds']:.3f} s), {stats['hits']} hits"
        )
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> None:
    """Run both contenders in fresh processes and print the comparison."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--calls", type=int, default=5)
    parser.add_argument("--json", type=Path, help="also write the raw results here")
    parser.add_argument("--worker", choices=CONTENDERS, help=argparse.SUPPRESS)
    parser.add_argument("--result", type=Path, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)

    if args.worker:
        data = worker(args.worker, args.calls)
        args.result.write_text(json.dumps(data))
        return

    results: dict[str, dict[str, Any]] = {}
    for contender in CONTENDERS:
        print(f"running {contender} ...", file=sys.stderr, flush=True)
        results[contender] = run_fresh(contender, args.calls)
    print(report(results))
    if args.json:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        with tempfile.NamedTemporaryFile("w", dir=args.json.parent, delete=False) as out:
            json.dump(results, out, indent=2)
        os.replace(out.name, args.json)


if __name__ == "__main__":
    main()
