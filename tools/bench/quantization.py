"""Benchmark: pt2e quantization, stock vs ``lowerkit.pass_infra.accelerated_quantization()``.

For each zoo CNN and quantizer (ExecuTorch's Arm TOSA INT quantizer and XNNPACK's symmetric
static quantizer, both with torchao's HistogramObserver on activations): ``prepare_pt2e``,
calibration on the zoo's batches and ``convert_pt2e``, alternating stock / lowerkit in one
process (after one warm-up each), with medians and their ratio. Every run's converted module
is compared with stock's: the same graph code and bit-identical quantization parameters and
weights (a difference aborts the benchmark).

    python -m bench.quantization [--repeat 3] [--models cnn9_layernorm,resnet8]
                                 [--quantizers arm,xnnpack] [--json out.json]
"""

from __future__ import annotations

import argparse
import contextlib
import sys
from collections.abc import Callable
from typing import Any

from bench.harness import Comparison, Contender, compare, write_json

DEFAULT_MODELS = ("cnn9_layernorm", "resnet8", "mobilenet_v1_025", "ds_cnn")
QUANTIZERS = ("arm", "xnnpack")


def _quantizer(kind: str) -> Any:
    if kind == "arm":
        from lowerkit.arm_passes.devices import compile_spec_for, quantizer_for

        return quantizer_for(compile_spec_for("TOSA-1.0+INT"))
    from executorch.backends.xnnpack.quantizer.xnnpack_quantizer import (
        XNNPACKQuantizer,
        get_symmetric_quantization_config,
    )

    return XNNPACKQuantizer().set_global(get_symmetric_quantization_config())


def _quantize_fn(name: str, kind: str, accelerated: bool, out: list[Any]) -> Callable[[], None]:
    import torch
    from torchao.quantization.pt2e.quantize_pt2e import convert_pt2e, prepare_pt2e

    from lowerkit import zoo
    from lowerkit.pass_infra import accelerated_quantization

    model = zoo.get(name)
    inputs = model.example_inputs()
    calibration = model.calibration(4)
    program = torch.export.export(model.module().eval(), inputs)

    def run() -> None:
        scope = accelerated_quantization() if accelerated else contextlib.nullcontext()
        with scope:
            prepared = prepare_pt2e(program.module(check_guards=False), _quantizer(kind))
            with torch.no_grad():
                for batch in calibration:
                    prepared(*batch)
            out.append(convert_pt2e(prepared))

    return run


def _same(a: Any, b: Any) -> bool:
    import torch

    if a.code != b.code:
        return False
    state_a, state_b = a.state_dict(), b.state_dict()
    return list(state_a) == list(state_b) and all(torch.equal(state_a[k], state_b[k]) for k in state_a)


def bench(name: str, kind: str, repeat: int) -> Comparison:
    """Stock vs accelerated quantization of one model with one quantizer; checks every result."""
    stock_out: list[Any] = []
    fast_out: list[Any] = []
    comparison = compare(
        Contender("stock pt2e", _quantize_fn(name, kind, False, stock_out)),
        Contender("accelerated_quantization", _quantize_fn(name, kind, True, fast_out)),
        repeat=repeat,
        warmup=1,
        title=f"{name} {kind} quantizer: prepare + calibrate + convert",
    )
    reference = stock_out[0]
    different = [i for i, module in enumerate(stock_out + fast_out) if not _same(reference, module)]
    if different:
        sys.exit(f"{name} {kind}: converted modules differ from stock's (runs {different})")
    return comparison


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--models", default=",".join(DEFAULT_MODELS))
    parser.add_argument("--quantizers", default=",".join(QUANTIZERS))
    parser.add_argument("--json", default=None, help="write all comparisons to this JSON file")
    args = parser.parse_args(argv)
    comparisons = []
    for name in args.models.split(","):
        for kind in args.quantizers.split(","):
            if kind not in QUANTIZERS:
                parser.error(f"unknown quantizer {kind!r}; choose from {', '.join(QUANTIZERS)}")
            comparison = bench(name, kind, args.repeat)
            comparisons.append(comparison)
            print(comparison.table(), flush=True)
    print("\nsummary (median stock / median lowerkit; converted modules identical in every run):")
    for c in comparisons:
        print(f"  {c.title:<64} {c.baseline.median:7.2f} s {c.candidate.median:7.2f} s {c.ratio:6.2f}x")
    if args.json:
        write_json(comparisons, args.json)


if __name__ == "__main__":
    main()
