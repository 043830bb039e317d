"""Scale check: ~100 single-operator models quantized with lowerkit and lowered to Core ML.

Each case is a tiny model built around one aten op that ExecuTorch's Core ML
quantizer annotates (conv / linear with each activation, batch norm, binary ops,
pools, flatten) or passes through unannotated (everything else). Every case is
exported, quantized with lowerkit's CoreMLQuantizer (prepare_pt2e, calibrate,
convert_pt2e), re-exported and lowered with the stock ExecuTorch Core ML backend
(CoreMLPartitioner, to_edge_transform_and_lower, to_executorch), all in one
process. Printed: total wall time, time per stage, and each failing case.
Upstream's quantizer alone costs ~35 s per case (its prepare_pt2e), so this suite
would take about an hour with it.

    python -m bench.coreml_op_suite [--only SUBSTRING] [--json out.json]
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time
import traceback
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch
import torch.nn.functional as F
from torch import nn


class Fn(nn.Module):
    """A module applying ``fn(self, *inputs)``; holds optional submodules."""

    def __init__(self, fn: Callable[..., torch.Tensor], **modules: nn.Module) -> None:
        super().__init__()
        self.fn = fn
        for name, module in modules.items():
            self.add_module(name, module)

    def forward(self, *inputs: torch.Tensor) -> torch.Tensor:
        return self.fn(self, *inputs)


@dataclass(frozen=True)
class Case:
    """One single-op model: a name, a module factory and input shapes."""

    name: str
    build: Callable[[], nn.Module]
    shapes: tuple[tuple[int, ...], ...]
    int_input: bool = False


IMG = ((1, 4, 8, 8),)
VEC = ((2, 16),)

ACTS: dict[str, Callable[[torch.Tensor], torch.Tensor]] = {
    "relu": F.relu,
    "relu6": F.relu6,
    "leaky_relu": F.leaky_relu,
    "silu": F.silu,
    "elu": F.elu,
    "celu": F.celu,
    "selu": F.selu,
    "mish": F.mish,
    "hardtanh": F.hardtanh,
    "hardswish": F.hardswish,
    "hardsigmoid": F.hardsigmoid,
    "gelu": F.gelu,
    "sigmoid": torch.sigmoid,
    "logsigmoid": F.logsigmoid,
    "tanh": torch.tanh,
}
INPLACE_ACTS = ("relu", "hardtanh", "silu", "hardswish")


def _act_case(kind: str, act: str | None, in_place: bool = False) -> Case:
    def fn(self: Fn, x: torch.Tensor) -> torch.Tensor:
        y = self.op(x)
        if act is None:
            return y
        if in_place:
            return getattr(F, act)(y, inplace=True)
        return ACTS[act](y)

    op = nn.Conv2d(4, 8, 3, padding=1) if kind == "conv2d" else nn.Linear(16, 8)
    suffix = f"_{act}" + ("_" if in_place else "") if act else ""
    return Case(f"{kind}{suffix}", lambda: Fn(fn, op=op), IMG if kind == "conv2d" else VEC)


def _binary(name: str, fn: Callable[[torch.Tensor, torch.Tensor], torch.Tensor]) -> Case:
    def apply(self: Fn, x: torch.Tensor) -> torch.Tensor:
        a, b = self.a(x), self.b(x)
        return fn(a, b)

    return Case(name, lambda: Fn(apply, a=nn.Linear(16, 16), b=nn.Linear(16, 16)), VEC)


def _after_conv(name: str, fn: Callable[[torch.Tensor], torch.Tensor], dims: int = 2) -> Case:
    conv = {
        1: nn.Conv1d(4, 4, 3, padding=1),
        2: nn.Conv2d(4, 4, 3, padding=1),
        3: nn.Conv3d(4, 4, 3, padding=1),
    }[dims]
    shape = {1: (1, 4, 16), 2: (1, 4, 8, 8), 3: (1, 4, 4, 4, 4)}[dims]
    return Case(name, lambda: Fn(lambda self, x: fn(self.conv(x)), conv=conv), (shape,))


def _plain(
    name: str, fn: Callable[..., torch.Tensor], shapes: tuple[tuple[int, ...], ...] = IMG
) -> Case:
    return Case(name, lambda: Fn(lambda self, *xs: fn(*xs)), shapes)


def cases() -> list[Case]:
    """The suite, in a stable order."""
    out: list[Case] = []
    for kind in ("conv2d", "linear"):
        out.append(_act_case(kind, None))
        out += [_act_case(kind, act) for act in ACTS]
        out += [_act_case(kind, act, in_place=True) for act in INPLACE_ACTS]
    out += [
        _after_conv("conv1d", lambda y: y, 1),
        _after_conv("conv1d_relu", F.relu, 1),
        _after_conv("conv3d", lambda y: y, 3),
        _after_conv("conv3d_relu", F.relu, 3),
        Case("conv2d_nobias", lambda: nn.Conv2d(4, 8, 3, bias=False), IMG),
        Case("conv2d_bn", lambda: nn.Sequential(nn.Conv2d(4, 8, 3), nn.BatchNorm2d(8)), IMG),
        Case(
            "conv2d_bn_relu",
            lambda: nn.Sequential(nn.Conv2d(4, 8, 3), nn.BatchNorm2d(8), nn.ReLU()),
            IMG,
        ),
        Case(
            "conv1d_bn", lambda: nn.Sequential(nn.Conv1d(4, 8, 3), nn.BatchNorm1d(8)), ((1, 4, 16),)
        ),
        Case("linear_bn1d", lambda: nn.Sequential(nn.Linear(16, 8), nn.BatchNorm1d(8)), VEC),
        Case("conv_transpose2d", lambda: nn.ConvTranspose2d(4, 4, 2, stride=2), IMG),
        Case("depthwise_conv2d", lambda: nn.Conv2d(4, 4, 3, groups=4), IMG),
        _binary("add", torch.add),
        _binary("add_relu", lambda a, b: F.relu(a + b)),
        _binary("add_relu_", lambda a, b: F.relu(a + b, inplace=True)),
        _binary("iadd", lambda a, b: a.add_(b)),
        _binary("mul", torch.mul),
        _binary("mul_relu", lambda a, b: F.relu(a * b)),
        _binary("imul", lambda a, b: a.mul_(b)),
        _binary("mul_sigmoid", lambda a, b: torch.sigmoid(a * b)),
        _binary("matmul", lambda a, b: torch.matmul(a, b.t())),
        _binary("matmul_relu", lambda a, b: F.relu(torch.matmul(a, b.t()))),
        _binary("sub", torch.sub),
        _binary("div", lambda a, b: a / (b.abs() + 1)),
        _binary("cat", lambda a, b: torch.cat([a, b], dim=1)),
        _binary("bmm", lambda a, b: torch.bmm(a.unsqueeze(0), b.t().unsqueeze(0))),
        _binary("maximum", torch.maximum),
        _plain("add_scalar", lambda x: x + 1.5),
        _plain("mul_scalar", lambda x: x * 0.5),
        # Explicit strides: the Core ML converter rejects max_pool nodes without one.
        _after_conv("max_pool1d", lambda y: F.max_pool1d(y, 2, 2), 1),
        _after_conv("max_pool2d", lambda y: F.max_pool2d(y, 2, 2)),
        _after_conv("max_pool3d", lambda y: F.max_pool3d(y, 2, 2), 3),
        _after_conv("max_pool2d_no_stride", lambda y: F.max_pool2d(y, 2)),
        _after_conv("avg_pool1d", lambda y: F.avg_pool1d(y, 2), 1),
        _after_conv("avg_pool2d", lambda y: F.avg_pool2d(y, 2)),
        _after_conv("avg_pool3d", lambda y: F.avg_pool3d(y, 2), 3),
        _after_conv("adaptive_avg_pool1d", lambda y: F.adaptive_avg_pool1d(y, 1), 1),
        _after_conv("adaptive_avg_pool2d", lambda y: F.adaptive_avg_pool2d(y, 1)),
        _after_conv("adaptive_avg_pool3d", lambda y: F.adaptive_avg_pool3d(y, 1), 3),
        _after_conv("flatten", lambda y: torch.flatten(y, 1)),
        _after_conv("mean", lambda y: torch.mean(y, dim=(2, 3), keepdim=True)),
        _after_conv("max_pool2d_module", nn.MaxPool2d(2)),
        _after_conv("avg_pool2d_module", nn.AvgPool2d(2)),
        _plain("relu", F.relu),
        _plain("sigmoid", torch.sigmoid),
        _plain("tanh", torch.tanh),
        _plain("gelu", F.gelu),
        _plain("softmax", lambda x: torch.softmax(x, dim=-1)),
        _plain("log_softmax", lambda x: torch.log_softmax(x, dim=-1)),
        _plain("exp", torch.exp),
        _plain("sqrt", lambda x: torch.sqrt(x.abs() + 1)),
        _plain("pow", lambda x: x.pow(2)),
        _plain("clamp", lambda x: torch.clamp(x, -0.5, 0.5)),
        _plain("abs", torch.abs),
        _plain("neg", torch.neg),
        _plain("reshape", lambda x: x.reshape(1, 4, 64)),
        _plain("permute", lambda x: x.permute(0, 2, 3, 1)),
        _plain("transpose", lambda x: x.transpose(2, 3)),
        _plain("squeeze_unsqueeze", lambda x: x.unsqueeze(0).squeeze(0)),
        _plain("slice", lambda x: x[:, :2, 1:5, :]),
        _plain("split", lambda x: torch.split(x, 2, dim=1)[1]),
        _plain("pad", lambda x: F.pad(x, (1, 1, 1, 1))),
        _plain("upsample_nearest", lambda x: F.interpolate(x, scale_factor=2.0, mode="nearest")),
        _plain("upsample_bilinear", lambda x: F.interpolate(x, scale_factor=2.0, mode="bilinear")),
        _plain("sum", lambda x: x.sum(dim=1)),
        _plain("amax", lambda x: x.amax(dim=1)),
        _plain("var_mean", lambda x: x - x.mean(dim=(2, 3), keepdim=True)),
        _plain("where", lambda x: torch.where(x > 0, x, x * 0.1)),
        Case("layer_norm", lambda: nn.LayerNorm(16), VEC),
        Case("group_norm", lambda: nn.GroupNorm(2, 4), IMG),
        Case("batch_norm_alone", lambda: nn.BatchNorm2d(4), IMG),
        Case("instance_norm", lambda: nn.InstanceNorm2d(4), IMG),
        Case("embedding", lambda: nn.Embedding(32, 8), ((2, 5),), int_input=True),
        Case("pixel_shuffle", lambda: nn.PixelShuffle(2), IMG),
        _plain("expand", lambda x: x.expand(2, 4, 8, 8)),
        _plain("repeat", lambda x: x.repeat(1, 2, 1, 1)),
    ]
    return out


def _inputs(case: Case, seed: int) -> tuple[torch.Tensor, ...]:
    generator = torch.Generator().manual_seed(seed)
    if case.int_input:
        return tuple(torch.randint(0, 32, shape, generator=generator) for shape in case.shapes)
    return tuple(torch.randn(shape, generator=generator) for shape in case.shapes)


def run_case(case: Case) -> dict[str, float]:
    """Quantize and lower one case; return seconds per stage (raises on failure)."""
    import coremltools as ct
    from coremltools.optimize.torch.quantization import LinearQuantizerConfig
    from executorch.backends.apple.coreml.compiler import CoreMLBackend
    from executorch.backends.apple.coreml.partition import CoreMLPartitioner
    from executorch.exir import to_edge_transform_and_lower
    from torchao.quantization.pt2e.quantize_pt2e import convert_pt2e

    from lowerkit.coreml_quantizer import CoreMLQuantizer, prepare_pt2e

    times: dict[str, float] = {}
    start = time.perf_counter()
    torch.manual_seed(0)
    module = case.build().eval()
    inputs = _inputs(case, 0)
    exported = torch.export.export(module, inputs).module()
    times["export"] = time.perf_counter() - start

    start = time.perf_counter()
    prepared = prepare_pt2e(exported, CoreMLQuantizer(LinearQuantizerConfig()))
    with torch.no_grad():
        for seed in range(1, 3):
            prepared(*_inputs(case, seed))
    converted = convert_pt2e(prepared)
    times["quantize"] = time.perf_counter() - start

    start = time.perf_counter()
    program = torch.export.export(converted, inputs)
    # Quantized (int8) Core ML ops need iOS 17 or later.
    specs = CoreMLBackend.generate_compile_specs(minimum_deployment_target=ct.target.iOS17)
    edge = to_edge_transform_and_lower(
        program, partitioner=[CoreMLPartitioner(compile_specs=specs)]
    )
    pte = edge.to_executorch().buffer
    times["lower"] = time.perf_counter() - start
    if not pte:
        raise RuntimeError("empty .pte")
    return times


def main(argv: list[str] | None = None) -> None:
    """Run every case and print the wall time, stage totals and failures."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--only", help="run only cases whose name contains this")
    parser.add_argument("--json", type=Path, help="also write per-case results here")
    args = parser.parse_args(argv)

    selected = [c for c in cases() if not args.only or args.only in c.name]
    results: list[dict[str, Any]] = []
    totals: dict[str, float] = {}
    wall_start = time.perf_counter()
    for index, case in enumerate(selected, 1):
        start = time.perf_counter()
        try:
            stages = run_case(case)
            error = None
        except Exception as exc:
            stages = {}
            error = f"{type(exc).__name__}: {str(exc).splitlines()[0] if str(exc) else ''}"
            traceback.print_exc(file=sys.stderr)
        seconds = time.perf_counter() - start
        for stage, value in stages.items():
            totals[stage] = totals.get(stage, 0.0) + value
        results.append({"case": case.name, "seconds": seconds, "stages": stages, "error": error})
        status = "ok" if error is None else f"FAILED {error}"
        print(
            f"[{index:>3}/{len(selected)}] {case.name:<24} {seconds:7.2f} s  {status}", flush=True
        )
    wall = time.perf_counter() - wall_start

    from lowerkit.coreml_quantizer import pattern_cache

    failures = [r for r in results if r["error"]]
    stats = pattern_cache.stats()
    print(
        f"\n{len(selected)} cases, {len(selected) - len(failures)} ok, {len(failures)} failed; "
        f"wall {wall:.1f} s"
    )
    print("stage totals: " + ", ".join(f"{k} {v:.1f} s" for k, v in totals.items()))
    print(
        f"lowerkit pattern_cache: {stats.builds} builds ({stats.build_seconds:.2f} s), {stats.hits} hits"
    )
    for failure in failures:
        print(f"  FAILED {failure['case']}: {failure['error']}")
    if args.json:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        with tempfile.NamedTemporaryFile("w", dir=args.json.parent, delete=False) as out:
            json.dump({"wall_seconds": wall, "cases": results}, out, indent=2)
        os.replace(out.name, args.json)


if __name__ == "__main__":
    main()
