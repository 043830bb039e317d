"""VERIFIED_GRAPHS: the edge verifier's dtype check runs once per graph that passes, on the calls'
recorded values where pass-infra vouches for them, and stock's check decides every graph that fails."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

import pytest
import torch
from executorch.exir import to_edge
from executorch.exir.verification.verifier import EXIREdgeDialectVerifier
from torch._export.verifier import SpecViolationError

from lowerkit.pass_infra import _upstream
from lowerkit.pass_infra.accelerations import verified_graphs
from lowerkit.pass_infra.accelerations.replay_engine import vouch_graph
from lowerkit.pass_infra.accelerations.verified_graphs import (
    VERIFIED_GRAPHS,
    graph_key,
    passes_on_recorded_values,
)


class _AddScaled(torch.nn.Module):
    def forward(self, x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
        return torch.add(x, y, alpha=2.0)


def _edge_module() -> torch.fx.GraphModule:
    inputs = (torch.randn(2, 3), torch.randn(2, 3))
    return to_edge(torch.export.export(_AddScaled(), inputs)).exported_program().graph_module


@pytest.fixture
def stock_runs(monkeypatch: pytest.MonkeyPatch) -> Iterator[list[int]]:
    """Counts the stock check's runs (installed under VERIFIED_GRAPHS, which wraps it)."""
    module = _upstream.edge_verifier_module()
    stock: Callable[[Any], None] = getattr(module, _upstream.ARGUMENT_CHECK)
    runs: list[int] = []

    def counting(gm: Any) -> None:
        runs.append(1)
        stock(gm)

    monkeypatch.setattr(module, _upstream.ARGUMENT_CHECK, counting)
    yield runs


@pytest.fixture
def recorded_runs(monkeypatch: pytest.MonkeyPatch) -> Iterator[list[bool]]:
    """The answers of the check on recorded values, one per graph it was asked about."""
    runs: list[bool] = []

    def counting(gm: Any) -> bool:
        runs.append(passes_on_recorded_values(gm))
        return runs[-1]

    monkeypatch.setattr(verified_graphs, "passes_on_recorded_values", counting)
    yield runs


@pytest.fixture
def calls_run(monkeypatch: pytest.MonkeyPatch) -> Iterator[list[Any]]:
    """The targets torch's Interpreter runs (the check on recorded values runs only calls not vouched for)."""
    runs: list[Any] = []
    stock = torch.fx.Interpreter.call_function

    def counting(self: Any, target: Any, args: Any, kwargs: Any) -> Any:
        runs.append(target)
        return stock(self, target, args, kwargs)

    monkeypatch.setattr(torch.fx.Interpreter, "call_function", counting)
    yield runs


def _verify(gm: torch.fx.GraphModule) -> None:
    EXIREdgeDialectVerifier()(gm)


def test_an_unchanged_graph_is_checked_once(stock_runs: list[int], recorded_runs: list[bool]) -> None:
    gm = _edge_module()
    stock_runs.clear()  # to_edge's own validations
    with VERIFIED_GRAPHS.scope():
        for _ in range(3):
            _verify(gm)
    assert recorded_runs == [True] and stock_runs == []
    _verify(gm)  # outside the scope: stock, every time
    assert len(stock_runs) == 1


def test_a_changed_graph_is_checked_again(stock_runs: list[int], recorded_runs: list[bool]) -> None:
    gm = _edge_module()
    stock_runs.clear()
    with VERIFIED_GRAPHS.scope():
        _verify(gm)
        add = next(n for n in gm.graph.nodes if n.op == "call_function")
        add.kwargs = {"alpha": 3.0}
        _verify(gm)
    assert recorded_runs == [True, True] and stock_runs == []


def test_calls_vouched_for_give_their_recorded_values_and_the_rest_run(calls_run: list[Any]) -> None:
    gm = _edge_module()
    add = next(n for n in gm.graph.nodes if n.op == "call_function")
    calls_run.clear()
    assert passes_on_recorded_values(gm)
    assert calls_run == [add.target]  # not vouched for: run, as stock runs it
    vouch_graph(gm)
    calls_run.clear()
    assert passes_on_recorded_values(gm)
    assert calls_run == []


def test_a_stale_recorded_value_leaves_the_graph_to_the_stock_check(stock_runs: list[int]) -> None:
    gm = _edge_module()
    add = next(n for n in gm.graph.nodes if n.op == "call_function")
    add.meta["val"] = add.meta["val"].to(torch.float64)  # a float32 add that claims a float64 result
    assert not passes_on_recorded_values(gm)  # run: it computes float32
    vouch_graph(gm)
    assert not passes_on_recorded_values(gm)  # taken as recorded: float32 inputs, a float64 output
    stock_runs.clear()
    with VERIFIED_GRAPHS.scope(), pytest.raises(SpecViolationError, match="mismatched dtypes"):
        _verify(gm)
    assert len(stock_runs) == 1


class _ConstantCast(torch.nn.Module):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x + torch.tensor(3).to(torch.int32)


def test_calls_on_a_constant_compute_alike_when_their_constants_are_the_recorded_ones() -> None:
    """FakeTensor carries a small lifted constant's data through the calls on it (BERT's attention
    mask: a cast of a lifted constant): calls that recompute their recorded constants pass on
    recorded values; a recorded constant other than what its call computes goes to the stock check."""
    gm = to_edge(torch.export.export(_ConstantCast(), (torch.randn(2, 3),))).exported_program().graph_module
    constant, _, clone, cast, back, _, _ = gm.graph.nodes
    cast.args = (constant,)  # the cast reads the constant itself, as BERT's
    gm.graph.erase_node(clone)

    def carry(node: torch.fx.Node, data: torch.Tensor) -> None:
        fake = node.meta["val"]
        node.meta["val"] = _upstream.FakeTensor(fake.fake_mode, data.to("meta"), data.device, constant=data)

    for node, data in [(constant, torch.tensor(3)), (cast, torch.tensor(3, dtype=torch.int32)), (back, torch.tensor(3.0))]:
        carry(node, data)
    assert passes_on_recorded_values(gm)
    carry(cast, torch.tensor(4, dtype=torch.int32))
    assert not passes_on_recorded_values(gm)


def test_a_failing_graph_fails_every_time(stock_runs: list[int]) -> None:
    gm = _edge_module()
    add = next(n for n in gm.graph.nodes if n.op == "call_function")
    add.meta["val"] = add.meta["val"].to(torch.int32)  # a float add that claims an int32 result
    stock_runs.clear()
    with VERIFIED_GRAPHS.scope():
        for _ in range(2):
            with pytest.raises(SpecViolationError, match="mismatched dtypes"):
                _verify(gm)
    assert len(stock_runs) == 2


def test_the_key_holds_what_the_check_reads() -> None:
    gm = _edge_module()
    key = graph_key(gm)
    assert graph_key(gm) == key
    placeholder = next(n for n in gm.graph.nodes if n.op == "placeholder")
    placeholder.meta["val"] = placeholder.meta["val"].to(torch.float64)
    assert graph_key(gm) != key
    # One-element tensors are keyed by their data too: FakeTensor may compute with it.
    one, other = torch.tensor([1.0]), torch.tensor([2.0])
    gm.register_buffer("c", one)
    with gm.graph.inserting_before(placeholder):
        gm.graph.get_attr("c")
    with_one = graph_key(gm)
    gm.register_buffer("c", other)
    assert graph_key(gm) != with_one


def _copied(gm: torch.fx.GraphModule, *, new_input_values: bool = False) -> dict[torch.fx.Node, torch.fx.Node]:
    """{node: its ``Graph.node_copy`` in a new graph}; with `new_input_values`, placeholders hold other value objects."""
    graph = torch.fx.Graph()
    copies: dict[torch.fx.Node, torch.fx.Node] = {}
    for node in gm.graph.nodes:
        copied = graph.node_copy(node, lambda n: copies[n])
        if new_input_values and node.op == "placeholder":
            copied.meta = {**copied.meta, "val": copied.meta["val"].clone()}
        copies[node] = copied
    return copies


def test_copies_of_vouched_calls_give_their_recorded_values_to_this_check_only() -> None:
    """Partition programs and deep copies are built with ``Graph.node_copy``: inside the scope, a
    copy of a vouched call (or of such a copy) that reads the same value objects is taken as
    recorded by this check, and by nothing else (a replay does not reuse its value)."""
    from lowerkit.pass_infra.accelerations.replay_engine import is_vouched, is_vouched_copy

    gm = _edge_module()
    vouch_graph(gm)
    calls = [n for n in gm.graph.nodes if n.op == "call_function"]
    with VERIFIED_GRAPHS.scope():
        copies = _copied(gm)
        second = _copied(torch.fx.GraphModule(gm, copies[calls[0]].graph))
        other = _copied(gm, new_input_values=True)
    assert calls and all(is_vouched_copy(copies[n]) and not is_vouched(copies[n]) for n in calls)
    assert all(is_vouched_copy(n) for n in second.values() if n.op == "call_function")
    assert not any(is_vouched_copy(other[n]) for n in calls)
    outside = _copied(gm)
    assert not any(is_vouched_copy(outside[n]) for n in calls)  # stock outside the scope
    copies[calls[0]].args = copies[calls[0]].args[::-1]
    assert not is_vouched_copy(copies[calls[0]])  # changed since it was copied
