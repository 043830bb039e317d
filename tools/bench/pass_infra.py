"""Benchmark: lowerkit.pass_infra vs the stock ExportPass replay, side by side.

Three comparisons, each alternating stock / lowerkit runs on the same input:

1. cold node: a TargetedPass on a >=1,000-node edge graph with one targeted node; the
   reference is the same pass replayed the stock way (every node re-dispatched through
   FakeTensor), lowerkit fast-copies the untargeted nodes, inside the scope a PassPipeline
   applies (cheaper replay incl. lazy code generation, wider FakeTensor cache). Reported
   per graph node.
2. replayed node: a plain ExportPass (no targets) on the graph an earlier replay made
   (as in a pipeline), stock vs inside `cheaper_replay()`. Reported per graph node.
3. pipeline: the Arm transform-for-annotation pipeline (54 real ExecuTorch Arm passes) on
   the zoo's cnn9_layernorm: torch's PassManager over the stock passes vs PassPipeline
   over the same passes wrapped with `as_targeted` where `discover_targeted_ops` finds
   targets. Graph copies and pass lists are built outside the timing. The two results
   are checked to be the same graph.

Graph nodes carry the meta keys of a to_edge graph and an 8-level provenance chain
(meta["from_node"]), as measured on the Arm pipeline's graphs.

    python -m bench.pass_infra [--repeat 5] [--nodes 1200] [--json out.json]
"""

from __future__ import annotations

import argparse
import copy
import sys
import time
from collections.abc import Callable
from typing import Any

from bench.harness import Comparison, Contender, Timing, compare, write_json

GOALS = {"cold node": 20.0, "replayed node": 1.5, "pipeline": 2.0}


def build_chain(length: int, provenance_depth: int = 8) -> Any:
    """An edge graph x -> mul -> add -> sub -> ... (`length` nodes) ending in one relu."""
    import torch
    from executorch.exir.dialects._ops import ops as exir_ops
    from torch._subclasses.fake_tensor import FakeTensorMode
    from torch.fx.traceback import NodeSource, NodeSourceAction

    edge = exir_ops.edge.aten
    steps = (edge.mul.Tensor, edge.add.Tensor, edge.sub.Tensor)
    mode = FakeTensorMode(allow_non_fake_inputs=True)
    graph = torch.fx.Graph()
    x = graph.placeholder("x")
    x.meta["val"] = mode.from_tensor(torch.zeros(2, 8))
    current = x
    with mode:
        for i in range(length):
            op = edge.relu.default if i == length - 1 else steps[i % len(steps)]
            args = (current,) if op == edge.relu.default else (current, x)
            node = graph.call_function(op, args)
            node.meta["val"] = op(*(a.meta["val"] for a in args))
            # The meta keys a to_edge graph's nodes carry.
            node.meta["stack_trace"] = f'File "model.py", line {i}, in forward'
            node.meta["nn_module_stack"] = {"L__self__": ("", "Model")}
            node.meta["torch_fn"] = (f"fn_{i}", "method_descriptor.fn")
            node.meta["original_aten"] = op._op
            node.meta["seq_nr"] = i
            node.meta["debug_handle"] = i + 1
            chain: list[Any] = []
            for level in range(provenance_depth):
                source = NodeSource(None, f"pass_{level}", NodeSourceAction.CREATE)
                source.node_info = NodeSource.NodeInfo(f"{node.name}_{level}", "t", level)
                source.from_node = chain
                chain = [source]
            node.meta["from_node"] = chain
            current = node
    graph.output((current,))
    return torch.fx.GraphModule(torch.nn.Module(), graph)


def _per_node(comparison: Comparison, nodes: int) -> str:
    return (
        f"  per node: {comparison.baseline.name} {comparison.baseline.median / nodes * 1e6:.1f} us,"
        f" {comparison.candidate.name} {comparison.candidate.median / nodes * 1e6:.1f} us"
    )


def bench_cold(gm: Any, repeat: int) -> Comparison:
    """TargetedPass: fast-copy of untargeted nodes vs the stock replay of the same pass."""
    from executorch.exir.dialects._ops import ops as exir_ops

    from lowerkit.pass_infra import PassPipeline, TargetedPass, reference_copy

    relu = exir_ops.edge.aten.relu.default

    class ReluToClamp(TargetedPass):
        targeted_ops = (relu,)

        def call_operator(self, op: Any, args: Any, kwargs: Any, meta: Any) -> Any:
            if op == relu:
                clamp = exir_ops.edge.aten.clamp.default
                return super().call_operator(clamp, (args[0], 0.0), {}, meta)
            return super().call_operator(op, args, kwargs, meta)

    fast = ReluToClamp()
    stock = reference_copy(ReluToClamp())
    scope = PassPipeline([fast]).scope  # the speed-ups a PassPipeline run applies

    def fast_copy() -> None:
        with scope():
            fast(gm)

    return compare(
        Contender("stock replay", lambda: stock(gm)),
        Contender("fast-copy", fast_copy),
        repeat=repeat,
        warmup=1,
        title=f"cold node: TargetedPass on a {len(gm.graph.nodes)}-node graph, 1 node targeted",
    )


def bench_replay(gm: Any, repeat: int) -> Comparison:
    """A plain ExportPass: stock replay vs cheaper_replay()."""
    from executorch.exir.pass_base import ExportPass

    from lowerkit.pass_infra import cheaper_replay

    class Replay(ExportPass):
        pass

    # In a pipeline a pass replays what the previous pass's replay made; start from that.
    with cheaper_replay():
        replayed = Replay()(gm).graph_module

    def cheap() -> None:
        with cheaper_replay():
            Replay()(replayed)

    return compare(
        Contender("stock replay", lambda: Replay()(replayed)),
        Contender("cheaper_replay", cheap),
        repeat=repeat,
        warmup=1,
        title=f"replayed node: plain ExportPass on a {len(gm.graph.nodes)}-node graph",
    )


def arm_tfa_passes(graph_module: Any) -> list[Any]:
    """The passes ArmPassManager.transform_for_annotation_pipeline would run, not run (also
    the sameness tests' Arm pipeline, tests/pass_infra/test_sameness.py)."""
    from unittest import mock

    from executorch.backends.arm._passes import arm_pass_manager
    from executorch.backends.arm.tosa.compile_spec import TosaCompileSpec
    from torch.fx.passes.infra.pass_base import PassResult

    captured: list[Any] = []

    class Capture:
        def __init__(self, passes: list[Any]) -> None:
            captured.extend(passes)

        def __call__(self, gm: Any) -> PassResult:
            return PassResult(gm, False)

    manager = arm_pass_manager.ArmPassManager(TosaCompileSpec("TOSA-1.0+INT"))
    with mock.patch.object(arm_pass_manager, "GraphModulePassManager", Capture):
        manager.transform_for_annotation_pipeline(graph_module)
    return captured


def bench_pipeline(repeat: int, model: str = "cnn9_layernorm") -> tuple[Comparison, Any, int]:
    """The Arm annotation pipeline: stock PassManager vs PassPipeline with discovery."""
    import torch
    from torch.fx.passes.infra.pass_manager import PassManager

    from lowerkit import zoo
    from lowerkit.pass_infra import (
        PassPipeline,
        as_targeted,
        discover_targeted_ops,
        first_difference,
    )

    entry = zoo.get(model)
    base = torch.export.export(entry.module(), entry.example_inputs()).module(check_guards=False)

    def stock_setup() -> Callable[[], Any]:
        gm = copy.deepcopy(base)
        passes = arm_tfa_passes(gm)
        return lambda: PassManager(passes)(gm).graph_module

    def fast_setup() -> Callable[[], Any]:
        gm = copy.deepcopy(base)
        passes = [as_targeted(p) if discover_targeted_ops(p) else p for p in arm_tfa_passes(gm)]
        return lambda: PassPipeline(passes).run(gm)

    times: dict[str, list[float]] = {"stock PassManager": [], "PassPipeline": []}
    results: dict[str, Any] = {}
    for round_index in range(repeat + 1):  # round 0 warms up
        for name, setup in (("stock PassManager", stock_setup), ("PassPipeline", fast_setup)):
            run = setup()
            start = time.perf_counter()
            results[name] = run()
            seconds = time.perf_counter() - start
            if round_index:
                times[name].append(seconds)
            print(
                f"  [{round_index}/{repeat}] {name}: {seconds:.4f} s", file=sys.stderr, flush=True
            )
    stock_gm = results["stock PassManager"]
    fast_gm, report = results["PassPipeline"]
    diff = first_difference(stock_gm, fast_gm)
    if diff is not None or stock_gm.code != fast_gm.code:
        raise SystemExit(f"pipeline results differ: {diff}")
    comparison = Comparison(
        f"pipeline: Arm annotation pipeline ({len(report.rows)} passes) on {model}",
        Timing("stock PassManager", times["stock PassManager"]),
        Timing("PassPipeline", times["PassPipeline"]),
    )
    return comparison, report, len(report.rows)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--nodes", type=int, default=1200)
    parser.add_argument("--json", default=None, help="write the comparisons to this JSON file")
    args = parser.parse_args(argv)
    if args.nodes < 1000:
        parser.error("--nodes must be at least 1000")

    gm = build_chain(args.nodes)
    nodes = len(gm.graph.nodes)
    cold = bench_cold(gm, args.repeat)
    print(cold.table())
    print(_per_node(cold, nodes), flush=True)
    replay = bench_replay(gm, args.repeat)
    print(replay.table())
    print(_per_node(replay, nodes), flush=True)
    pipeline, report, count = bench_pipeline(args.repeat)
    print(pipeline.table())
    ran = sum(r.ran for r in report.rows)
    print(f"  {count} passes, {ran} ran, {count - ran} skipped; results identical", flush=True)

    print("\nsummary (median stock / median lowerkit; goal):")
    for key, comparison in (("cold node", cold), ("replayed node", replay), ("pipeline", pipeline)):
        verdict = "met" if comparison.ratio >= GOALS[key] else "NOT met"
        print(f"  {key:<14} {comparison.ratio:7.2f}x   goal >= {GOALS[key]:g}x: {verdict}")
    if args.json:
        write_json([cold, replay, pipeline], args.json)
    sys.stdout.flush()


if __name__ == "__main__":
    main()
