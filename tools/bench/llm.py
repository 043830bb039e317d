"""Benchmark: ExecuTorch's LLM export (``export_llama``), stock vs inside lowerkit's scopes, side by side.

Each model x target of `bench.llm_flows` runs each side in a fresh process per run, as
`bench.realworld` runs its cases (``OMP_NUM_THREADS=1``, ``PYTHONHASHSEED=0``, sides alternating,
``--repeat`` rounds, medians, the JSON rewritten after every case). The worker pays its imports
(`bench.realworld_flows.preimport`: every module of the lowerkit packages the side runs, and
``export_llama_lib``) and writes the model's params and seeded checkpoint before the clock
starts; the clock covers the whole ``export_llama`` call. Compared: the ``.pte`` sha256 (Arm) or the
canonical Core ML payload digests.

    python -m bench.llm [--models llama_2l,llama_8l] [--targets tosa-int,coreml-c4w] [--repeat 1] [--json OUT]
    python -m bench.report OUT.json --write docs/benchmarks.md
"""

from __future__ import annotations

import argparse
import importlib
import os
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from bench.llm_flows import (
    ALL_TARGETS,
    COREML_TARGETS,
    MODELS,
    PREFILL_DECODE,
    SIDES,
    export,
    model_files,
)
from bench.realworld import run_cases, summarize, write_record
from bench.realworld_flows import Lowered, preimport

GROUP = "executorch LLM export (export_llama, KV cache, static shapes)"


def worker(side: str, model_name: str, target: str, out: Path) -> None:
    """Export one case one side's way in this (fresh) process; write its record to `out` as JSON."""

    def prepare(record: dict[str, Any]) -> Callable[[], Lowered]:
        preimport(side, target in COREML_TARGETS, "executorch.examples.models.llama.export_llama_lib")
        if target.startswith("vgf"):  # where ExecuTorch's VGF backend looks for Arm's converter (its docs), both sides
            from lowerkit.arm_passes.converter import packaged_model_converter

            os.environ.setdefault("MODEL_CONVERTER_PATH", str(packaged_model_converter()))
        if target == PREFILL_DECODE:  # the exporter's own module (lowerkit's side: bound to lowerkit's backend)
            if side == "stock":
                importlib.import_module("executorch.examples.apple.coreml.llama.export_static_llm_coreml")
            else:
                from lowerkit.coreml_preprocess.static_llm_export import static_llm_script

                static_llm_script()
        model_files(model_name)
        record["imports_s"] = time.perf_counter() - start
        return lambda: export(side, model_name, target)

    start = time.perf_counter()
    write_record(side, model_name, target, out, prepare)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--worker", nargs=4, metavar=("SIDE", "MODEL", "TARGET", "OUT"), help=argparse.SUPPRESS)
    parser.add_argument("--models", default="llama_2l", help=", ".join(MODELS))
    parser.add_argument("--targets", default="tosa-int,coreml-c4w", help=", ".join(ALL_TARGETS))
    parser.add_argument("--sides", default=",".join(SIDES), help="stock first; any of " + ", ".join(SIDES))
    parser.add_argument("--repeat", type=int, default=1)
    parser.add_argument("--timeout", type=float, default=2400.0, help="seconds per worker process")
    parser.add_argument("--json", type=Path, default=None)
    args = parser.parse_args(argv)
    if args.worker:
        side, model_name, target, out = args.worker
        worker(side, model_name, target, Path(out))
        return 0
    models = [m for m in args.models.split(",") if m]
    targets = [t for t in args.targets.split(",") if t]
    sides = [s for s in args.sides.split(",") if s]
    bad = [m for m in models if m not in MODELS] + [t for t in targets if t not in ALL_TARGETS] + [s for s in sides if s not in SIDES]
    if bad or args.repeat < 1:
        raise SystemExit(f"unknown {', '.join(bad) or '--repeat'}; models: {', '.join(MODELS)}; targets: {', '.join(ALL_TARGETS)}")
    return run_cases(
        [(m, t) for m in models for t in targets], sides, repeat=args.repeat, timeout=args.timeout,
        json_path=args.json, argv=sys.argv[1:] if argv is None else argv, runner="bench.llm",
        summary=lambda model_name, target, runs: summarize(
            model_name, target, runs, sides, group=GROUP, coreml=target in COREML_TARGETS
        ),
    )  # fmt: skip


if __name__ == "__main__":
    sys.exit(main())
