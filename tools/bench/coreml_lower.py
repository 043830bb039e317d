"""Benchmark: ExecuTorch's Core ML backend vs lowerkit.coreml_preprocess, side by side.

Times ``to_edge_transform_and_lower(exported_program, partitioner=[CoreMLPartitioner(...)])``
for each zoo model with each side's partitioner and backend. The two backends share the backend
id ``CoreMLBackend`` and cannot live in one process, so each side runs in a worker process of its
own, started once; the driver alternates the workers run by run (ExecuTorch, lowerkit, ...), each
worker exports a fresh program before a run and times only the lowering. Medians and their ratio
are printed per model, and the payloads' Core ML model specs are checked to be the same.

    python -m bench.coreml_lower [--repeat 3] [--models conv_linear,resnet8] [--json out.json]
    python -m bench.coreml_lower --worker executorch|lowerkit   (internal)
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import subprocess
import sys
import time
from typing import IO, Any

from bench.harness import Comparison, Timing, write_json

SIDES = ("executorch", "lowerkit")
#: Lowering options per model: ExecuTorch's defaults, int8 linear weights for the tied LM.
OPTIONS: dict[str, dict[str, Any] | None] = {
    "tiny_lm": {
        "minimum_deployment_target": "iOS17",
        "op_linear_quantizer_config": {
            "mode": "linear_symmetric", "dtype": "int8", "granularity": "per_channel",
        },
    },
}


def _specs(side: str, options: dict[str, Any] | None) -> Any:
    import coremltools as ct

    if options is None:
        return None
    if side == "lowerkit":
        from lowerkit.coreml_preprocess import CoreMLCompileOptions

        return CoreMLCompileOptions(**options).to_compile_specs()
    from executorch.backends.apple.coreml.compiler import CoreMLBackend

    kwargs = dict(options)
    if kwargs.get("minimum_deployment_target") is not None:
        kwargs["minimum_deployment_target"] = ct.target[kwargs["minimum_deployment_target"]]
    return CoreMLBackend.generate_compile_specs(**kwargs)


def _spec_digest(processed: bytes) -> str:
    """sha256 of a payload's model spec, deterministically serialized, without date and record."""
    import tempfile
    from pathlib import Path

    import coremltools as ct

    # ExecuTorch's own payload reader: usable on both sides (lowerkit's package refuses to
    # load next to ExecuTorch's Core ML backend).
    from executorch.backends.apple.coreml import executorchcoreml

    with tempfile.TemporaryDirectory() as tmp:
        executorchcoreml.unflatten_directory_contents(processed, tmp)
        spec_path = next(Path(tmp).rglob("model.mlmodel"))
        spec = ct.proto.Model_pb2.Model()
        spec.ParseFromString(spec_path.read_bytes())
    for key in ("com.github.apple.coremltools.conversion_date", "lowerkit.mil_pass_pipeline"):
        spec.description.metadata.userDefined.pop(key, None)
    return hashlib.sha256(spec.SerializeToString(deterministic=True)).hexdigest()


def worker(side: str) -> None:
    """Serve ``model name`` lines on stdin: lower it, answer ``{"seconds", "specs"}`` on stdout."""
    import logging

    logging.disable(logging.WARNING)
    import importlib

    import torch
    from executorch.exir import to_edge_transform_and_lower
    from executorch.exir.lowered_backend_module import LoweredBackendModule

    from lowerkit import zoo

    partitioner_module = importlib.import_module(
        "lowerkit.coreml_preprocess" if side == "lowerkit" else "executorch.backends.apple.coreml.partition"
    )
    partitioner_class = partitioner_module.CoreMLPartitioner
    out: IO[str] = sys.stdout
    sys.stdout = sys.stderr  # keep library prints off the answer channel
    for line in sys.stdin:
        name = line.strip()
        model = zoo.get(name)
        program = torch.export.export(model.module(), model.example_inputs())
        partitioner = partitioner_class(compile_specs=_specs(side, OPTIONS.get(name)))
        start = time.perf_counter()
        manager = to_edge_transform_and_lower(program, partitioner=[partitioner])
        seconds = time.perf_counter() - start
        module = manager.exported_program().graph_module
        lowered = [m for _, m in module.named_children() if isinstance(m, LoweredBackendModule)]
        specs = [_spec_digest(m.processed_bytes) for m in lowered]
        out.write(json.dumps({"seconds": seconds, "specs": specs}) + "\n")
        out.flush()


class _Worker:
    def __init__(self, side: str) -> None:
        self.side = side
        self.process = subprocess.Popen(
            [sys.executable, "-m", "bench.coreml_lower", "--worker", side],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL if os.environ.get("BENCH_DEBUG") is None else None,
            text=True, env={**os.environ, "PYTHONPATH": os.pathsep.join(p for p in sys.path if p)},
        )

    def run(self, name: str) -> dict[str, Any]:
        assert self.process.stdin is not None and self.process.stdout is not None
        self.process.stdin.write(name + "\n")
        self.process.stdin.flush()
        answer = self.process.stdout.readline()
        if not answer:
            raise RuntimeError(f"the {self.side} worker died lowering {name}")
        result: dict[str, Any] = json.loads(answer)
        return result

    def close(self) -> None:
        assert self.process.stdin is not None
        self.process.stdin.close()
        self.process.wait(timeout=60)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--worker", choices=SIDES)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--models", default="")
    parser.add_argument("--json", default="")
    args = parser.parse_args(argv)
    if args.worker:
        worker(args.worker)
        return
    from lowerkit import zoo

    names = [n for n in args.models.split(",") if n] or zoo.names()
    workers = {side: _Worker(side) for side in SIDES}
    comparisons: list[Comparison] = []
    total = {side: 0.0 for side in SIDES}
    try:
        for name in names:
            times: dict[str, list[float]] = {side: [] for side in SIDES}
            digests: dict[str, list[str]] = {}
            workers["executorch"].run(name)  # warm up both on this model
            workers["lowerkit"].run(name)
            for round_index in range(args.repeat):
                for side in SIDES:
                    result = workers[side].run(name)
                    times[side].append(result["seconds"])
                    digests[side] = result["specs"]
                    print(f"  [{round_index + 1}/{args.repeat}] {name} {side}: "
                          f"{result['seconds']:.3f} s", file=sys.stderr, flush=True)
            same = digests["executorch"] == digests["lowerkit"]
            comparison = Comparison(
                f"{name}: to_edge_transform_and_lower (Core ML specs same: {same})",
                Timing("executorch", times["executorch"]),
                Timing("lowerkit", times["lowerkit"]),
            )
            comparisons.append(comparison)
            for side in SIDES:
                total[side] += comparison.baseline.median if side == "executorch" else comparison.candidate.median
            print(comparison.table(), flush=True)
    finally:
        for w in workers.values():
            w.close()
    print(f"sum of medians: executorch {total['executorch']:.3f} s, lowerkit {total['lowerkit']:.3f} s, "
          f"ratio {total['executorch'] / total['lowerkit']:.2f}x")
    if args.json:
        write_json(comparisons, args.json)


if __name__ == "__main__":
    main()
