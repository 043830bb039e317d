"""Small hand-built graphs for pass-infra tests (no export, no to_edge: fast)."""

from __future__ import annotations

import copy
from collections.abc import Callable, Sequence
from typing import Any

import pytest
import torch
from executorch.exir.dialects._ops import ops as exir_ops
from executorch.exir.pass_base import ExportPass
from torch._subclasses.fake_tensor import FakeTensorMode
from torch.fx import GraphModule
from torch.fx.traceback import NodeSource, NodeSourceAction

E = exir_ops.edge.aten

#: One step of a chain: (edge op, extra args after the running value).
Step = tuple[Any, tuple[Any, ...]]
DEFAULT_STEPS: tuple[Step, ...] = (
    (E.mul.Tensor, ("x",)),
    (E.add.Tensor, ("x",)),
    (E.relu.default, ()),
    (E.sub.Tensor, ("x",)),
)


def _fake_provenance(name: str, depth: int) -> list[NodeSource]:
    chain: list[NodeSource] = []
    for level in range(depth):
        source = NodeSource(None, f"pass_{level}", NodeSourceAction.CREATE)
        source.node_info = NodeSource.NodeInfo(name=f"{name}_{level}", target="t", graph_id=level)
        source.from_node = chain
        chain = [source]
    return chain


def build_chain(
    length: int,
    steps: Sequence[Step] = DEFAULT_STEPS,
    *,
    provenance_depth: int = 0,
    shape: tuple[int, ...] = (2, 3),
    seq_nr: bool = True,
) -> GraphModule:
    """x -> step -> step -> ... (`length` call_function nodes) with fake meta["val"]s."""
    mode = FakeTensorMode(allow_non_fake_inputs=True)
    graph = torch.fx.Graph()
    x = graph.placeholder("x")
    x.meta["val"] = mode.from_tensor(torch.zeros(shape))
    current = x
    with mode:
        for i in range(length):
            op, extra = steps[i % len(steps)]
            args = (current, *(x if a == "x" else a for a in extra))
            node = graph.call_function(op, args)
            node.meta["val"] = op(
                *(a.meta["val"] if isinstance(a, torch.fx.Node) else a for a in args)
            )
            node.meta["stack_trace"] = f'File "model.py", line {i}, in forward'
            node.meta["nn_module_stack"] = {"L__self__": ("", "Model")}
            if seq_nr:
                node.meta["seq_nr"] = i
            if provenance_depth:
                node.meta["from_node"] = _fake_provenance(node.name, provenance_depth)
            current = node
    graph.output((current,))
    return GraphModule(torch.nn.Module(), graph)


class CondModule(torch.nn.Module):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        def true_fn(x: torch.Tensor) -> torch.Tensor:
            return torch.sigmoid(x) * 2

        def false_fn(x: torch.Tensor) -> torch.Tensor:
            return torch.tanh(x) + 1

        return torch.cond(x.sum() > 0, true_fn, false_fn, (x,)) + 1


@pytest.fixture(scope="session")
def cond_graph() -> GraphModule:
    """An exported (ATen) graph whose sigmoid / tanh live only inside torch.cond branches."""
    return torch.export.export(CondModule(), (torch.randn(2, 3),)).graph_module


@pytest.fixture
def chain() -> Callable[..., GraphModule]:
    return build_chain


def run_stock(pass_: ExportPass, gm: GraphModule, *, copy_input: bool = False) -> GraphModule:
    """Run a pass on `gm` (ExportPass replays leave their input alone) and return the new graph.

    Provenance records id(input graph), so runs compared node for node share one input.
    """
    result = pass_(copy.deepcopy(gm) if copy_input else gm)
    assert result is not None
    return result.graph_module


def meta_differences(a: GraphModule, b: GraphModule) -> list[str]:
    """Every node-meta difference between two graphs (val by shape/dtype/stride, rest by ==)."""
    out: list[str] = []
    nodes_a, nodes_b = list(a.graph.nodes), list(b.graph.nodes)
    if len(nodes_a) != len(nodes_b):
        return [f"node count {len(nodes_a)} != {len(nodes_b)}"]
    for x, y in zip(nodes_a, nodes_b, strict=True):
        if x.name != y.name:
            out.append(f"name {x.name} != {y.name}")
        if set(x.meta) != set(y.meta):
            out.append(f"{x.name}: keys {sorted(set(x.meta) ^ set(y.meta))}")
            continue
        if list(x.meta) != list(y.meta):
            out.append(f"{x.name}: key order {list(x.meta)} != {list(y.meta)}")
        for key in x.meta:
            va, vb = x.meta[key], y.meta[key]
            if key == "val":
                sa = [(t.shape, t.dtype, t.stride()) for t in _tensors(va)]
                sb = [(t.shape, t.dtype, t.stride()) for t in _tensors(vb)]
                if sa != sb:
                    out.append(f"{x.name}: val {sa} != {sb}")
            elif va != vb:
                out.append(f"{x.name}: {key}: {va!r} != {vb!r}")
    return out


def _tensors(value: Any) -> list[torch.Tensor]:
    return [v for v in torch.utils._pytree.tree_leaves(value) if isinstance(v, torch.Tensor)]
