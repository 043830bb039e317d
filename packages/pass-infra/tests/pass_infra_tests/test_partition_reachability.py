"""PARTITION_REACHABILITY: torch's partitioner reachability as bitsets, against stock in the same run."""

from __future__ import annotations

import random
import threading
from typing import Any

import torch
from torch.fx import GraphModule
from torch.fx.passes.infra.partitioner import CapabilityBasedPartitioner
from torch.fx.passes.operator_support import OperatorSupportBase

from lowerkit.pass_infra import _upstream
from lowerkit.pass_infra.accelerations.partition_reachability import (
    PARTITION_REACHABILITY,
    Downstreams,
)

Viewer = _upstream.partitioner_dependency_viewer()


def _random_dag(nodes: int, seed: int) -> GraphModule:
    """A graph of binary ops on random earlier values, some values used many times, some never."""
    rng = random.Random(seed)
    graph = torch.fx.Graph()
    values = [graph.placeholder("a"), graph.placeholder("b")]
    ops = [torch.add, torch.mul, torch.sub, torch.maximum]
    for _ in range(nodes):
        left, right = rng.choice(values[-8:]), rng.choice(values)
        values.append(graph.call_function(rng.choice(ops), (left, right)))
    graph.output(values[-1])
    return GraphModule(torch.nn.Module(), graph)


def _stock(graph_module: GraphModule) -> Any:
    assert not PARTITION_REACHABILITY.installed
    return Viewer(graph_module)


def _ours(graph_module: GraphModule) -> Any:
    with PARTITION_REACHABILITY.scope():
        return Viewer(graph_module)


def test_every_node_has_stocks_downstream_nodes_and_keys_in_stocks_order() -> None:
    for seed in range(3):
        graph_module = _random_dag(300, seed)
        stock, ours = _stock(graph_module).downstreams, _ours(graph_module).downstreams
        assert type(ours) is Downstreams
        assert len(ours) == len(stock)
        assert all(node in ours for node in stock)
        assert all(ours[node] == stock[node] for node in graph_module.graph.nodes)
        assert list(ours) == list(stock)  # iterating makes the rest, in stock's key order


def test_downstreams_of_iterates_stocks_nodes_and_answers_membership() -> None:
    graph_module = _random_dag(200, 7)
    stock, ours = _stock(graph_module), _ours(graph_module)
    nodes = list(graph_module.graph.nodes)
    with PARTITION_REACHABILITY.scope():
        for node in nodes:
            view = ours.downstreams_of(node)
            expected = stock.downstreams_of(node)
            assert set(view) == expected and len(view) == len(expected)
            assert [n in view for n in nodes] == [n in expected for n in nodes]
            assert (view | {node}) == (expected | {node})


def test_a_graph_out_of_order_gives_stocks_snapshot_sets() -> None:
    graph_module = _random_dag(120, 3)
    nodes = list(graph_module.graph.nodes)
    nodes[40].append(nodes[90])  # a producer after its user: stock reads the user's set as it was
    assert any(arg in nodes[41:90] for arg in nodes[90].all_input_nodes)
    stock, ours = _stock(graph_module).downstreams, _ours(graph_module).downstreams
    assert all(ours[node] == stock[node] for node in graph_module.graph.nodes)


def test_a_set_read_through_the_mapping_is_the_one_downstreams_of_gives() -> None:
    graph_module = _random_dag(50, 1)
    node = next(iter(graph_module.graph.nodes))
    viewer = _ours(graph_module)
    viewer.downstreams[node].add("marker")
    with PARTITION_REACHABILITY.scope():
        assert "marker" in viewer.downstreams_of(node)
    assert viewer.downstreams.get("absent") is None and "absent" not in viewer.downstreams


def test_a_viewer_built_in_scope_answers_as_stock_in_another_thread() -> None:
    graph_module = _random_dag(80, 2)
    viewer = _ours(graph_module)
    stock = _stock(graph_module)
    answers: list[bool] = []
    thread = threading.Thread(
        target=lambda: answers.extend(
            viewer.downstreams_of(n) == stock.downstreams_of(n) for n in graph_module.graph.nodes
        )
    )
    with PARTITION_REACHABILITY.scope():
        thread.start()
        thread.join()
    assert answers and all(answers)


class _EveryThirdUnsupported(OperatorSupportBase):
    """Unsupported nodes in the middle of the graph: merges must be checked for cycles."""

    def __init__(self, graph_module: GraphModule) -> None:
        self.unsupported = set(list(graph_module.graph.nodes)[::3])

    def is_node_supported(self, submodules: Any, node: torch.fx.Node) -> bool:
        return node.op == "call_function" and node not in self.unsupported


def _partitions(graph_module: GraphModule) -> list[list[str]]:
    support = _EveryThirdUnsupported(graph_module)
    found = CapabilityBasedPartitioner(graph_module, support).propose_partitions()
    return sorted(sorted(node.name for node in partition.nodes) for partition in found)


def test_the_partitioner_proposes_stocks_partitions() -> None:
    for seed in range(3):
        graph_module = _random_dag(250, seed)
        stock = _partitions(graph_module)
        with PARTITION_REACHABILITY.scope():
            ours = _partitions(graph_module)
        assert ours == stock and len(stock) > 1
