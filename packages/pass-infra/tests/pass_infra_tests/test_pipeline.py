"""PassPipeline: per-pass report, verify mode catching a pass that lies about its targets."""

from __future__ import annotations

import copy
import json
from collections.abc import Callable
from typing import Any

import pytest
from executorch.exir.dialects._ops import ops as exir_ops
from executorch.exir.pass_base import ExportPass
from torch.fx import GraphModule
from torch.fx.passes.infra.pass_base import PassResult

from lowerkit.pass_infra import (
    PassEquivalenceError,
    PassInfraError,
    PassPipeline,
    Patch,
    Replacement,
    TargetedPass,
    first_difference,
    reference_copy,
)
from pass_infra_tests.conftest import build_chain, meta_differences

E = exir_ops.edge.aten


class ReluToClamp(TargetedPass):
    targeted_ops = (E.relu.default,)

    def call_operator(self, op, args, kwargs, meta):
        if op == E.relu.default:
            return super().call_operator(E.clamp.default, (args[0], 0.0), {}, meta)
        return super().call_operator(op, args, kwargs, meta)


class ExpToSigmoid(TargetedPass):
    targeted_ops = (E.exp.default,)

    def call_operator(self, op, args, kwargs, meta):
        if op == E.exp.default:
            op = E.sigmoid.default
        return super().call_operator(op, args, kwargs, meta)


class SubToAddLiar(TargetedPass):
    """Claims to target relu only but rewrites sub too: fast-copy hides the sub rewrite."""

    targeted_ops = (E.relu.default,)

    def call_operator(self, op, args, kwargs, meta):
        if op == E.sub.Tensor:
            op = E.add.Tensor
        return super().call_operator(op, args, kwargs, meta)


class StockNoop(ExportPass):
    pass


def remove_nothing(gm: GraphModule) -> None:
    """A plain function pass working in place."""


def test_report_rows_table_and_json():
    gm = build_chain(12)
    pipeline = PassPipeline([ReluToClamp(), ExpToSigmoid(), StockNoop(), remove_nothing])
    out, report = pipeline.run(gm)
    assert (
        [r.name for r in report.rows]
        == pipeline.names
        == [
            "ReluToClamp",
            "ExpToSigmoid",
            "StockNoop",
            "remove_nothing",
        ]
    )
    assert [r.ran for r in report.rows] == [True, False, True, True]
    assert [r.changed for r in report.rows] == [True, False, False, False]
    assert all(r.nodes_before == r.nodes_after == 14 for r in report.rows)
    assert E.relu.default not in {n.target for n in out.graph.nodes}
    table = report.table()
    assert "ReluToClamp" in table and "skipped" in table and "total" in table
    data = json.loads(report.to_json())
    assert [p["name"] for p in data["passes"]] == pipeline.names
    assert set(data["passes"][0]) == {
        "name",
        "ran",
        "wall_ms",
        "nodes_before",
        "nodes_after",
        "changed",
        "verified",
    }
    assert "ExpToSigmoid" in str(pipeline)


def test_without_change_tracking_the_rows_leave_changed_unset_and_the_graph_is_the_same():
    passes: list[Callable[[GraphModule], Any]] = [ReluToClamp(), ExpToSigmoid(), StockNoop(), remove_nothing]
    tracked, _ = PassPipeline(passes).run(build_chain(12))
    untracked, report = PassPipeline(passes, track_changes=False).run(build_chain(12))
    assert [r.changed for r in report.rows] == [None] * 4
    assert [r.ran for r in report.rows] == [True, False, True, True]
    assert all(r.nodes_before == r.nodes_after == 14 for r in report.rows)
    assert first_difference(tracked, untracked) is None
    assert report.table().splitlines()[1].endswith("  -")


def test_pipeline_result_equals_running_the_passes_stock():
    gm = build_chain(20, provenance_depth=2)
    fast, _ = PassPipeline([ReluToClamp(), StockNoop()]).run(gm)
    reference = reference_copy(ReluToClamp())
    stock = StockNoop()(reference(gm).graph_module).graph_module
    assert first_difference(stock, fast) is None
    assert stock.code == fast.code


def test_verify_mode_passes_honest_passes():
    gm = build_chain(12)
    _out, report = PassPipeline([ReluToClamp(), ExpToSigmoid(), StockNoop()], verify=True).run(gm)
    assert all(r.verified for r in report.rows)
    assert "*" in report.table()


def test_verify_mode_catches_a_pass_lying_about_its_targets():
    gm = build_chain(12)
    # Without verify the lie goes unnoticed: sub nodes survive.
    out, _ = PassPipeline([SubToAddLiar()]).run(gm)
    assert E.sub.Tensor in {n.target for n in out.graph.nodes}
    with pytest.raises(PassEquivalenceError) as caught:
        PassPipeline([ReluToClamp(), SubToAddLiar()], verify=True).run(gm)
    err = caught.value
    assert err.pass_name == "SubToAddLiar"
    assert err.node.startswith("aten_sub_tensor ")
    assert "SubToAddLiar" in str(err) and "targeted_ops" in str(err)


_STOCK_CALL_OPERATOR = ExportPass.call_operator


def _relu_as_sigmoid(self, op, args, kwargs, meta):
    """A deliberately wrong acceleration: ExportPass replays relu as sigmoid."""
    if op == E.relu.default:
        op = E.sigmoid.default
    return _STOCK_CALL_OPERATOR(self, op, args, kwargs, meta)


WRONG_ACCELERATION = Patch("planted wrong acceleration", lambda: [Replacement(ExportPass, "call_operator", _relu_as_sigmoid)])


def test_verify_mode_compares_with_stock_while_a_lowerkit_scope_is_open():
    gm = build_chain(12)
    with WRONG_ACCELERATION.scope():
        out, _ = PassPipeline([StockNoop()]).run(gm)
        assert E.sigmoid.default in {n.target for n in out.graph.nodes}  # the patch is wrong
        with pytest.raises(PassEquivalenceError) as caught:
            PassPipeline([StockNoop()], verify=True).run(gm)
    assert caught.value.pass_name == "StockNoop"
    assert caught.value.node.startswith("aten_sigmoid_default")  # the fast side's node
    PassPipeline([StockNoop()], verify=True).run(gm)  # stock on both sides once the scope is closed


def test_bad_pipelines_are_user_errors():
    with pytest.raises(PassInfraError, match="instance"):
        PassPipeline([StockNoop])
    with pytest.raises(PassInfraError, match="not a pass"):
        PassPipeline([42])  # type: ignore[list-item]
    with pytest.raises(PassInfraError, match="PassResult"):
        PassPipeline([lambda gm: 3]).run(build_chain(2))


def test_pass_result_from_a_function_pass():
    def identity(gm: GraphModule) -> PassResult:
        return PassResult(gm, False)

    gm = build_chain(4)
    out, report = PassPipeline([identity]).run(gm)
    assert out is gm and report.rows[0].name == "identity"
    assert meta_differences(gm, out) == []


def insert_sum_in_place_with_stale_meta(gm: GraphModule) -> PassResult:
    """An in-place pass that leaves a wrong meta["val"] behind for the next replay to fix."""
    graph = gm.graph
    relu = next(n for n in graph.nodes if n.target == E.relu.default)
    with graph.inserting_after(relu):
        summed = graph.call_function(E.sum.dim_IntList, (relu, [1], True))
    summed.meta = dict(relu.meta)  # stale: a (2, 3) value for a (2, 1) result
    relu.replace_all_uses_with(summed, delete_user_cb=lambda user: user is not summed)
    gm.recompile()
    return PassResult(gm, True)


def test_fast_copy_in_a_pipeline_does_not_keep_stale_values_of_in_place_passes():
    gm = build_chain(12)
    stock_in = copy.deepcopy(gm)
    insert_sum_in_place_with_stale_meta(stock_in)
    stock = reference_copy(ExpToSigmoid())(stock_in).graph_module
    ExpToSigmoidRuns = type("ExpToSigmoidRuns", (ExpToSigmoid,), {"targeted_ops": (E.mul.Tensor,)})
    ours, report = PassPipeline([insert_sum_in_place_with_stale_meta, ExpToSigmoidRuns()]).run(gm)
    assert report.rows[1].ran
    summed = next(n for n in ours.graph.nodes if n.target == E.sum.dim_IntList)
    assert tuple(summed.meta["val"].shape) == (2, 1)
    assert first_difference(stock, ours) is None
    # Provenance names each run's own input graph (two copies here); all else is equal.
    assert all(": from_node:" in d for d in meta_differences(stock, ours))


def test_an_in_place_pass_last_leaves_code_that_runs_the_new_graph():
    """As torch's PassManager recompiles after every pass: the module returned runs its graph."""
    import operator

    import torch
    from torch.fx import symbolic_trace
    from torch.fx.passes.infra.pass_manager import PassManager

    class AddOne(torch.nn.Module):
        def forward(self, x: torch.Tensor) -> torch.Tensor:
            return x + 1

    def add_to_mul(gm: GraphModule) -> PassResult:
        for node in gm.graph.nodes:
            if node.target is operator.add:
                node.target = operator.mul
        return PassResult(gm, True)

    x = torch.tensor([3.0])
    stock = PassManager([add_to_mul])(symbolic_trace(AddOne())).graph_module
    ours, _ = PassPipeline([add_to_mul, ExpToSigmoid()]).run(symbolic_trace(AddOne()))
    assert ours.code == stock.code
    assert torch.equal(ours(x), stock(x)) and torch.equal(stock(x), torch.tensor([3.0]))
