"""cheaper_replay: same graphs and metadata as the stock replay, without the deep copy."""

from __future__ import annotations

import copy

import pytest
import torch
from executorch.exir.dialects._ops import ops as exir_ops
from executorch.exir.pass_base import ExportPass, NodeMetadata

from lowerkit.pass_infra import cheaper_replay, vouch_for
from lowerkit.pass_infra._upstream import replay_state_snapshot
from pass_infra_tests.conftest import build_chain, meta_differences, run_stock

E = exir_ops.edge.aten


class AddNegAfterRelu(ExportPass):
    """Creates a node with fresh metadata, so the replay's provenance record survives."""

    def __init__(self) -> None:
        super().__init__()
        self.debug_strings: list[str | None] = []

    def call_operator(self, op, args, kwargs, meta):
        self.debug_strings.append(self.node_debug_str)
        out = super().call_operator(op, args, kwargs, meta)
        if op == E.relu.default:
            return super().call_operator(E.neg.default, (out,), {}, NodeMetadata({}))
        return out


class InPlaceThenReplay(ExportPass):
    """Overrides call(): edits in place, then replays (a common upstream shape)."""

    def call(self, graph_module):
        for node in graph_module.graph.nodes:
            if node.target == E.sub.Tensor:
                node.target = E.add.Tensor
        graph_module.recompile()
        return super().call(graph_module)


@pytest.mark.parametrize("depth", [0, 4])
@pytest.mark.parametrize("pass_cls", [AddNegAfterRelu, InPlaceThenReplay])
def test_cheaper_replay_leaves_exactly_the_stock_metadata(pass_cls, depth):
    gm = build_chain(16, provenance_depth=depth)
    stock_pass, cheap_pass = pass_cls(), pass_cls()
    stock = run_stock(stock_pass, gm, copy_input=pass_cls is InPlaceThenReplay)
    with cheaper_replay():
        cheap = run_stock(cheap_pass, gm, copy_input=pass_cls is InPlaceThenReplay)
    if pass_cls is InPlaceThenReplay:
        # Different (copied) inputs: provenance graph ids differ by construction.
        for g in (stock, cheap):
            for n in g.graph.nodes:
                n.meta.pop("from_node", None)
    assert cheap.code == stock.code
    assert meta_differences(stock, cheap) == []
    if pass_cls is AddNegAfterRelu:
        assert cheap_pass.debug_strings == stock_pass.debug_strings
        assert cheap_pass.node_debug_str == stock_pass.node_debug_str


def test_fresh_nodes_keep_an_equal_provenance_chain_that_is_shared_not_copied():
    gm = build_chain(4, provenance_depth=6)
    relu = next(n for n in gm.graph.nodes if n.target == E.relu.default)
    stock = run_stock(AddNegAfterRelu(), gm)
    with cheaper_replay():
        cheap = run_stock(AddNegAfterRelu(), gm)
    neg_stock = next(n for n in stock.graph.nodes if n.target == E.neg.default)
    neg_cheap = next(n for n in cheap.graph.nodes if n.target == E.neg.default)
    [src_stock], [src_cheap] = neg_stock.meta["from_node"], neg_cheap.meta["from_node"]
    assert src_cheap == src_stock
    assert src_cheap.to_dict() == src_stock.to_dict()
    assert src_cheap.name == relu.name
    # Stock deep-copied the old chain; the cheaper replay shares it.
    assert src_stock.from_node[0] is not relu.meta["from_node"][0]
    assert src_cheap.from_node[0] is relu.meta["from_node"][0]


def test_patches_are_restored_on_exit_and_on_exception():
    before = replay_state_snapshot()
    with cheaper_replay():
        assert replay_state_snapshot() != before
    assert replay_state_snapshot() == before
    with pytest.raises(RuntimeError, match="boom"), cheaper_replay():
        raise RuntimeError("boom")
    assert replay_state_snapshot() == before


def test_debug_string_is_materialized_when_the_scope_ends():
    gm = build_chain(4)
    stock_pass, cheap_pass = AddNegAfterRelu(), AddNegAfterRelu()
    run_stock(stock_pass, gm)
    with cheaper_replay():
        run_stock(cheap_pass, gm)
    assert "node_debug_str" not in vars(type(cheap_pass))
    assert cheap_pass.__dict__["node_debug_str"] == stock_pass.node_debug_str


class Noop(ExportPass):
    pass


@pytest.mark.parametrize("reuse_values", [True, False])
def test_value_reuse_skips_the_dispatch_and_leaves_stock_metadata(reuse_values):
    gm = build_chain(12, provenance_depth=2)
    vouch_for(gm)
    old = {n.name: n.meta["val"] for n in gm.graph.nodes if n.op == "call_function"}
    stock = run_stock(Noop(), gm)
    with cheaper_replay(reuse_values=reuse_values):
        cheap = run_stock(Noop(), gm)
    assert cheap.code == stock.code
    assert meta_differences(stock, cheap) == []
    reused = [n.meta["val"] is old[n.name] for n in cheap.graph.nodes if n.name in old]
    assert all(reused) if reuse_values else not any(reused)
    assert not any(n.meta["val"] is old[n.name] for n in stock.graph.nodes if n.name in old)


def test_a_rewritten_node_is_dispatched_not_reused():
    gm = build_chain(8)
    vouch_for(gm)
    old = {n.name: n.meta["val"] for n in gm.graph.nodes if n.op == "call_function"}
    with cheaper_replay():
        out = run_stock(AddNegAfterRelu(), gm)
    neg = next(n for n in out.graph.nodes if n.target == E.neg.default)
    relu = next(n for n in out.graph.nodes if n.target == E.relu.default)
    assert relu.meta["val"] is old[relu.name]
    assert all(neg.meta["val"] is not v for v in old.values())


def test_unvouched_values_are_dispatched():
    gm = build_chain(8)
    old = {n.name: n.meta["val"] for n in gm.graph.nodes if n.op == "call_function"}
    with cheaper_replay():
        first = run_stock(Noop(), gm)
        second = run_stock(Noop(), first)
    assert not any(n.meta["val"] is old.get(n.name) for n in first.graph.nodes)
    # What a replay made is vouched for: the next replay reuses it.
    made = {n.name: n.meta["val"] for n in first.graph.nodes if n.op == "call_function"}
    assert all(n.meta["val"] is made[n.name] for n in second.graph.nodes if n.name in made)


class InsertWithStaleMeta(ExportPass):
    """Like DecomposeLayerNormPass: inserts a node in place with another node's (wrong)
    meta["val"], edits a vouched node's args, then relies on its own replay to fix values."""

    def call(self, graph_module):
        graph = graph_module.graph
        relu = next(n for n in graph.nodes if n.target == E.relu.default)
        mul = next(n for n in graph.nodes if n.target == E.mul.Tensor)
        with graph.inserting_after(relu):
            summed = graph.call_function(E.sum.dim_IntList, (relu, [1], True))
        summed.meta = dict(relu.meta)  # stale: relu's (2, 3) value for a (2, 1) result
        relu.replace_all_uses_with(summed, delete_user_cb=lambda user: user is not summed)
        mul.update_arg(1, mul.args[0])  # a vouched node whose args changed in place
        graph_module.recompile()
        return super().call(graph_module)


def test_stale_values_left_by_in_place_edits_are_not_reused():
    gm = build_chain(12)
    stock_in, cheap_in = copy.deepcopy(gm), copy.deepcopy(gm)
    vouch_for(cheap_in)
    stock = InsertWithStaleMeta()(stock_in).graph_module
    with cheaper_replay():
        cheap = InsertWithStaleMeta()(cheap_in).graph_module
    for g in (stock, cheap):
        for n in g.graph.nodes:
            n.meta.pop("from_node", None)
    summed = next(n for n in cheap.graph.nodes if n.target == E.sum.dim_IntList)
    assert tuple(summed.meta["val"].shape) == (2, 1)
    assert cheap.code == stock.code
    assert meta_differences(stock, cheap) == []


class ReshapePlaceholderThenReplay(ExportPass):
    """Like Arm's UnsqueezeScalarPlaceholdersPass: replaces a placeholder's meta["val"] in place
    (rank 0 -> (1,)), then relies on its replay to recompute every user's value."""

    def call(self, graph_module):
        placeholder = next(n for n in graph_module.graph.nodes if n.op == "placeholder")
        fake = placeholder.meta["val"]
        placeholder.meta["val"] = fake.fake_mode.from_tensor(torch.zeros(1), static_shapes=True)
        return super().call(graph_module)


@pytest.mark.parametrize("reuse_values", [True, False])
def test_values_of_users_of_an_input_replaced_in_place_are_dispatched(reuse_values):
    gm = build_chain(6, shape=())
    stock_in, cheap_in = copy.deepcopy(gm), copy.deepcopy(gm)
    vouch_for(cheap_in)
    stock = ReshapePlaceholderThenReplay()(stock_in).graph_module
    with cheaper_replay(reuse_values=reuse_values):
        cheap = ReshapePlaceholderThenReplay()(cheap_in).graph_module
    for g in (stock, cheap):
        for n in g.graph.nodes:
            n.meta.pop("from_node", None)
    assert all(tuple(n.meta["val"].shape) == (1,) for n in cheap.graph.nodes if n.op == "call_function")
    assert cheap.code == stock.code
    assert meta_differences(stock, cheap) == []


class ReluToAbs(ExportPass):
    """Changes one op early in a chain; every later node is re-created unchanged."""

    def call_operator(self, op, args, kwargs, meta):
        if op == E.relu.default:
            return super().call_operator(E.abs.default, args, kwargs, meta)
        return super().call_operator(op, args, kwargs, meta)


def test_nodes_after_a_changed_one_reuse_their_values_and_match_stock():
    """abs's value is dispatched anew: its users get a new FakeTensor with the old one's
    metadata, so their recorded values (none of them a view) are still what a dispatch gives."""
    gm = build_chain(12)
    vouch_for(gm)
    old = {n.name: n.meta["val"] for n in gm.graph.nodes if n.op == "call_function"}
    stock = run_stock(ReluToAbs(), gm)
    with cheaper_replay():
        cheap = run_stock(ReluToAbs(), gm)
    assert cheap.code == stock.code
    assert meta_differences(stock, cheap) == []
    nodes = [n for n in cheap.graph.nodes if n.op == "call_function"]
    first_abs = next(i for i, n in enumerate(nodes) if n.target == E.abs.default)
    after = [n for n in nodes[first_abs + 1 :] if n.target != E.abs.default]
    assert after and all(n.meta["val"] is old[n.name] for n in after)


class _AddThenMul(torch.nn.Module):
    def forward(self, x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
        return torch.sin((x + y) * y)


def test_a_delegate_call_reuses_its_value_and_matches_stock():
    """A delegate call's value is its lowered module run in fake mode (unlift, build a module, run
    it): with the same module and inputs the recorded value is reused, as for any other node."""
    from executorch.exir import to_edge
    from executorch.exir.backend.test.op_partitioner_demo import AddMulPartitionerDemo
    from executorch.exir.delegate import executorch_call_delegate

    inputs = (torch.randn(2, 3), torch.randn(2, 3))
    edge = to_edge(torch.export.export(_AddThenMul(), inputs)).to_backend(AddMulPartitionerDemo())
    with cheaper_replay():
        first = run_stock(Noop(), edge.exported_program().graph_module)  # dispatched: not vouched for
    old = next(n for n in first.graph.nodes if n.target is executorch_call_delegate).meta["val"]
    stock = run_stock(Noop(), first)
    with cheaper_replay():
        cheap = run_stock(Noop(), first)
    assert cheap.code == stock.code
    assert meta_differences(stock, cheap) == []
    delegate = next(n for n in cheap.graph.nodes if n.target is executorch_call_delegate)
    assert [v is o for v, o in zip(delegate.meta["val"], old, strict=True)] == [True]
    stock_val = next(n for n in stock.graph.nodes if n.target is executorch_call_delegate).meta["val"]
    assert stock_val[0] is not old[0]


class _Views(torch.nn.Module):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = torch.relu(x).view(2, 12).t()
        return torch.sigmoid(y.reshape(3, 8) + 1.0).permute(1, 0)


def test_torchs_copy_of_the_pass_base_replays_cheaper_with_stock_results():
    """ExecuTorch's edge stage runs torch's ReplaceViewOpsWithViewCopyOpsPass, built on torch's own
    copy of the ExportPass base: the cheaper replay covers it, with stock's graph and metadata."""
    from torch._export.passes.replace_view_ops_with_view_copy_ops_pass import (
        ReplaceViewOpsWithViewCopyOpsPass,
    )

    gm = torch.export.export(_Views(), (torch.randn(2, 3, 4),)).run_decompositions({}).graph_module
    vouch_for(gm)
    old = {n.name: n.meta["val"] for n in gm.graph.nodes if n.op == "call_function"}
    stock = run_stock(ReplaceViewOpsWithViewCopyOpsPass(), gm)
    with cheaper_replay():
        cheap = run_stock(ReplaceViewOpsWithViewCopyOpsPass(), gm)
    assert "view_copy" in cheap.code
    assert cheap.code == stock.code
    assert meta_differences(stock, cheap) == []
    relu = next(n for n in cheap.graph.nodes if n.target == torch.ops.aten.relu.default)
    assert relu.meta["val"] is old[relu.name]


class _AddRelu(torch.nn.Module):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.relu(x + 1.0) * 2.0


def test_an_aten_node_re_created_as_its_edge_op_reuses_its_value_and_matches_stock():
    """ExecuTorch's OpReplacePass re-creates every ATen node as its edge op, which calls the ATen op."""
    from executorch.exir.passes.replace_aten_with_edge_pass import OpReplacePass

    gm = torch.export.export(_AddRelu(), (torch.randn(2, 3),)).run_decompositions({}).graph_module
    vouch_for(gm)
    stock = run_stock(OpReplacePass(), gm)
    with cheaper_replay():
        cheap = run_stock(OpReplacePass(), gm)
    assert cheap.code == stock.code
    assert meta_differences(stock, cheap) == []
    aten_relu = next(n for n in gm.graph.nodes if n.target == torch.ops.aten.relu.default)
    edge_relu = next(n for n in cheap.graph.nodes if n.target == E.relu.default)
    assert edge_relu.meta["val"] is aten_relu.meta["val"]


class _QuantizeDequantize(torch.nn.Module):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        ops = torch.ops.quantized_decomposed
        q = ops.quantize_per_tensor.default(x, 0.05, 3, -128, 127, torch.int8)
        return ops.dequantize_per_tensor.default(q, 0.05, 3, -128, 127, torch.int8) + 1.0


def test_an_op_the_tracer_records_eager_input_values_for_is_copied_with_the_recorded_ones(monkeypatch):
    """torch's tracer records `eager_input_vals` for q/dq ops, and the replay then replaces them
    with the old node's: a node that has them is copied directly, with the same metadata."""
    from torch.fx.experimental.proxy_tensor import PythonKeyTracer

    gm = torch.export.export(_QuantizeDequantize(), (torch.randn(2, 3),)).run_decompositions({}).graph_module
    quantize = next(n for n in gm.graph.nodes if "quantize_per_tensor" in str(n.target))
    assert "eager_input_vals" in quantize.meta
    vouch_for(gm)
    stock = run_stock(ExportPass(), gm)
    traced: list[object] = []
    stock_create_node = PythonKeyTracer.create_node

    def counting(self, kind, target, *args, **kwargs):
        traced.append(target)
        return stock_create_node(self, kind, target, *args, **kwargs)

    monkeypatch.setattr(PythonKeyTracer, "create_node", counting)
    with cheaper_replay():
        cheap = run_stock(ExportPass(), gm)
    assert cheap.code == stock.code
    assert meta_differences(stock, cheap) == []
    assert quantize.target not in traced  # copied, not traced
    copied = next(n for n in cheap.graph.nodes if n.target is quantize.target)
    assert copied.meta["eager_input_vals"] is quantize.meta["eager_input_vals"]
