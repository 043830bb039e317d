"""DEAD_CODE: torch.fx's dead-code elimination erases what stock erases, asking fewer nodes."""

from __future__ import annotations

import contextlib
import copy
import random
from typing import Any

import pytest
import torch
from torch.fx import Graph, GraphModule, Node

from lowerkit.pass_infra.accelerations.dead_code import DEAD_CODE

_OPS = [
    torch.ops.aten.add.Tensor,
    torch.ops.aten.mul.Tensor,
    torch.ops.aten.neg.default,
    torch.ops.aten.add_.Tensor,  # mutable schema: impure, never erased
    torch.ops.aten.rand_like.default,  # random: impure with stock's impure_random
]


def _random_module(nodes: int, seed: int) -> GraphModule:
    """Binary / unary ops on random earlier values; many values never used (chains of dead code)."""
    rng = random.Random(seed)
    graph = Graph()
    values: list[Node] = [graph.placeholder("a"), graph.placeholder("b")]
    for _ in range(nodes):
        op = rng.choice(_OPS)
        args: tuple[Any, ...] = (rng.choice(values),) if op in _OPS[2:3] + _OPS[4:] else (
            rng.choice(values[-6:]), rng.choice(values),
        )  # fmt: skip
        values.append(graph.call_function(op, args))
    graph.output(values[len(values) // 2])
    return GraphModule(torch.nn.Module(), graph)


def _names(module: GraphModule) -> list[str]:
    return [f"{n.name}={n.target}{n.args}" for n in module.graph.nodes]


@pytest.mark.parametrize("seed", range(6))
def test_the_same_nodes_are_erased_as_stock(seed: int) -> None:
    module = _random_module(300, seed)
    stock = copy.deepcopy(module)
    stock_changed = stock.graph.eliminate_dead_code()
    with DEAD_CODE.scope():
        changed = module.graph.eliminate_dead_code()
    assert changed == stock_changed and changed
    assert _names(module) == _names(stock)
    assert len(module.graph.nodes) < 302


def test_only_nodes_without_users_are_asked(monkeypatch: pytest.MonkeyPatch) -> None:
    module = _random_module(200, 7)
    asked: list[Node] = []
    stock_is_impure = Node.is_impure

    def counting(node: Node, impure_random: bool = True) -> bool:
        asked.append(node)
        return stock_is_impure(node, impure_random)

    monkeypatch.setattr(Node, "is_impure", counting)
    stock = copy.deepcopy(module)
    stock.graph.eliminate_dead_code()
    stock_asked = len(asked)
    asked.clear()
    with DEAD_CODE.scope():
        module.graph.eliminate_dead_code()
    assert _names(module) == _names(stock)
    assert asked and len(asked) < stock_asked / 2
    assert len(stock.graph.nodes) < stock_asked  # stock asked the nodes it kept for their users too


def test_a_callers_own_purity_test_is_stocks() -> None:
    module = _random_module(50, 3)
    seen: list[str] = []

    def keep_all(node: Node) -> bool:
        seen.append(node.name)
        return True

    with DEAD_CODE.scope():
        module.graph.eliminate_dead_code(keep_all)
    assert len(seen) == len(module.graph.nodes)  # stock asks every node; nothing erased


def test_a_call_module_node_is_asked_as_stock_asks_it() -> None:
    """Stock raises for a call_module node on a graph without an owning module; so does the patch."""
    graph = Graph()
    x = graph.placeholder("x")
    used = graph.call_module("sub", (x,))
    graph.output(used)
    for scope in (DEAD_CODE.scope, contextlib.nullcontext):
        with scope(), pytest.raises(AssertionError, match="owning_module"):
            graph.eliminate_dead_code()


def test_subgraphs_and_restoration() -> None:
    module = _random_module(100, 11)
    module.add_submodule("inner", _random_module(100, 12))
    graph = module.graph
    with graph.inserting_before(next(iter(n for n in graph.nodes if n.op == "output"))):
        graph.get_attr("inner")
    stock = copy.deepcopy(module)
    stock.graph.eliminate_dead_code()
    with DEAD_CODE.scope():
        module.graph.eliminate_dead_code()
    assert _names(module) == _names(stock)
    assert _names(module.get_submodule("inner")) == _names(stock.get_submodule("inner"))
    assert "lowerkit_patch" not in vars(Graph.eliminate_dead_code)

