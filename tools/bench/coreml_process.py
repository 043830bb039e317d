"""Benchmark: a whole Core ML int8 lowering process, stock ExecuTorch script vs `lowerkit lower`.

Every run is a fresh process that turns a zoo model into ``.pte`` bytes on disk, imports
included (what a user waits for):

* ``stock``: the script an ExecuTorch user writes (`stock_script`): export, ExecuTorch's
  ``CoreMLQuantizer`` (``prepare_pt2e``, 8 calibration batches, ``convert_pt2e``), re-export,
  ``to_edge_transform_and_lower`` with ExecuTorch's ``CoreMLPartitioner`` (iOS17), ``to_executorch``;
* ``lowerkit cold``: ``lowerkit lower zoo:M -t coreml-int8 --no-cache`` with no daemon;
* ``lowerkit daemon``: the same command while a ``lowerkit daemon`` runs (started once before
  the rounds; its start-up is printed, not counted);
* ``lowerkit cache hit``: the command with the lowering cache holding this lowering.

Rounds alternate the four; medians and ratios to stock are printed, and a check that every
lowerkit run wrote the same bytes (sha256). Stock's bytes differ from run to run (ExecuTorch
writes a random identifier into each Core ML payload), so sameness with stock is not checked
here but by ``tests/coreml_preprocess/test_sameness.py`` (the Core ML model, weights and
compile specs against ExecuTorch's own backend).

    python -m bench.coreml_process [--repeat 3] [--model cnn9_layernorm] [--json out.json]
    python -m bench.coreml_process --stock-script MODEL OUT.pte   (the stock side, one run)
"""

from __future__ import annotations

import argparse
import hashlib
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from bench.harness import Comparison, Contender, Timing, write_json

#: The CLI's calibration batch count (lowerkit.cli.calibration.DEFAULT_BATCHES).
CALIBRATION_BATCHES = 8


def stock_script(model_name: str, output: Path) -> None:
    """What `lowerkit lower zoo:MODEL -t coreml-int8` does, written with stock ExecuTorch only."""
    import coremltools as ct
    import torch
    from executorch.backends.apple.coreml.compiler import CoreMLBackend
    from executorch.backends.apple.coreml.partition import CoreMLPartitioner
    from executorch.backends.apple.coreml.quantizer import CoreMLQuantizer
    from executorch.exir import to_edge_transform_and_lower
    from torchao.quantization.pt2e.quantize_pt2e import convert_pt2e, prepare_pt2e

    from lowerkit import zoo  # the model definition only (plain torch modules)
    from lowerkit.coreml_quantizer import static_int8_config  # the config only (no Core ML backend)

    entry = zoo.get(model_name)
    inputs = entry.example_inputs()
    program = torch.export.export(entry.module(), inputs)
    prepared = prepare_pt2e(program.module(), CoreMLQuantizer(static_int8_config()))
    with torch.no_grad():
        for batch in entry.calibration(CALIBRATION_BATCHES):
            prepared(*batch)
    quantized = torch.export.export(convert_pt2e(prepared), inputs)
    specs = CoreMLBackend.generate_compile_specs(
        minimum_deployment_target=ct.target.iOS17, compute_precision=ct.precision.FLOAT16
    )
    edge = to_edge_transform_and_lower(quantized, partitioner=[CoreMLPartitioner(compile_specs=specs)])
    output.write_bytes(edge.to_executorch().buffer)


def _digest(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()[:16]


def _start_daemon(env: dict[str, str]) -> float:
    start = time.perf_counter()
    subprocess.run([sys.executable, "-m", "lowerkit.cli", "daemon", "start"], env=env, check=True)
    return time.perf_counter() - start


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--model", default="cnn9_layernorm")
    parser.add_argument("--json", help="Write the comparisons here.")
    parser.add_argument("--stock-script", nargs=2, metavar=("MODEL", "OUT"), help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.stock_script:
        stock_script(args.stock_script[0], Path(args.stock_script[1]))
        return

    work = Path(tempfile.mkdtemp(prefix="lowerkit-bench-"))
    env = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join(p for p in sys.path if p),
        "LOWERKIT_DAEMON_DIR": str(work / "daemon"),
        "LOWERKIT_CACHE_DIR": str(work / "cache"),
    }
    cli = [sys.executable, "-m", "lowerkit.cli", "lower", f"zoo:{args.model}", "-t", "coreml-int8", "-q"]
    sides = {
        "stock ExecuTorch script": Contender(
            "stock", [sys.executable, "-m", "bench.coreml_process", "--stock-script", args.model, str(work / "stock.pte")]
        ),
        "lowerkit cold": Contender(
            "cold", [*cli, "-o", str(work / "cold.pte"), "--no-cache"], env={"LOWERKIT_NO_DAEMON": "1"}
        ),
        "lowerkit daemon": Contender("daemon", [*cli, "-o", str(work / "daemon.pte"), "--no-cache"]),
        "lowerkit cache hit": Contender(
            "cache", [*cli, "-o", str(work / "cache.pte")], env={"LOWERKIT_NO_DAEMON": "1"}
        ),
    }
    os.environ.update(env)  # the contenders' commands inherit it
    print(f"filling the cache: {sides['lowerkit cache hit'].run_once():.1f} s", file=sys.stderr)
    print(f"daemon start (not counted): {_start_daemon(env):.1f} s", file=sys.stderr)
    times: dict[str, list[float]] = {name: [] for name in sides}
    digests: dict[str, set[str]] = {name: set() for name in sides}
    try:
        for round_index in range(args.repeat):
            for name, contender in sides.items():
                seconds = contender.run_once()
                times[name].append(seconds)
                digests[name].add(_digest(work / f"{contender.name}.pte"))
                print(f"  [{round_index + 1}/{args.repeat}] {name}: {seconds:.2f} s", file=sys.stderr, flush=True)
    finally:
        subprocess.run([sys.executable, "-m", "lowerkit.cli", "daemon", "stop"], env=env, check=False)
    stock = Timing("stock ExecuTorch script", times["stock ExecuTorch script"])
    comparisons = [
        Comparison(f"{args.model} -> coreml-int8 .pte, whole process: stock vs {name}", stock, Timing(name, seconds))
        for name, seconds in times.items()
        if name != stock.name
    ]
    for comparison in comparisons:
        print(comparison.table())
    ours = set().union(*(d for name, d in digests.items() if name != stock.name))
    print(f"same .pte bytes in every lowerkit run: {'yes' if len(ours) == 1 else 'NO: ' + str(digests)}")
    print(f"stock runs wrote {len(digests[stock.name])} different .pte(s) in {args.repeat} runs")
    if args.json:
        write_json(comparisons, args.json)
    if len(ours) != 1:
        sys.exit(1)


if __name__ == "__main__":
    main()
