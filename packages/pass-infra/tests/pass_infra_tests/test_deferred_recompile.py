"""deferred_recompile: replayed modules inside a PassManager call compile once and come back as stock's."""

from __future__ import annotations

import copy
import operator
from typing import Any

import pytest
import torch
from executorch.exir.pass_base import ExportPass
from torch.fx import GraphModule, symbolic_trace
from torch.fx.passes.infra.pass_base import PassResult
from torch.fx.passes.infra.pass_manager import PassManager

from lowerkit.pass_infra import cheaper_replay
from lowerkit.pass_infra._upstream import LazyGraphModule
from lowerkit.pass_infra.accelerations.deferred_recompile import DEFERRED_RECOMPILE


class _Model(torch.nn.Module):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.relu(x + 1) * 2


class _EditThenReplay(ExportPass):
    """Edits the module it is given in place, then replays it (as Arm's DecomposeLayerNormPass does)."""

    def call(self, graph_module: GraphModule) -> PassResult:
        for node in graph_module.graph.nodes:
            if node.target is torch.ops.aten.add.Tensor:
                node.target = torch.ops.aten.sub.Tensor
        return super().call(graph_module)


class _RealCompiles:
    """Counts GraphModule.recompile calls that generate code (a lazy module's only marks it stale)."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch) -> None:
        self.count = 0
        stock = GraphModule.recompile

        def counting(module: GraphModule) -> Any:
            self.count += 1
            return stock(module)

        monkeypatch.setattr(GraphModule, "recompile", counting)


def _graph_module() -> GraphModule:
    return torch.export.export(_Model(), (torch.randn(4),)).graph_module


def _passes() -> list[Any]:
    return [_EditThenReplay(), *[ExportPass() for _ in range(6)]]


def test_replayed_modules_compile_once_and_come_back_plain(monkeypatch: pytest.MonkeyPatch) -> None:
    stock_in, ours_in = _graph_module(), _graph_module()
    compiles = _RealCompiles(monkeypatch)
    stock = PassManager(_passes())(stock_in).graph_module
    stock_count, compiles.count = compiles.count, 0
    with cheaper_replay(), DEFERRED_RECOMPILE.scope():
        ours = PassManager(_passes())(ours_in).graph_module
    assert compiles.count < stock_count / 3, (compiles.count, stock_count)
    assert not isinstance(ours, LazyGraphModule)
    assert type(ours).__bases__ == type(stock).__bases__ == (GraphModule,)
    assert type(ours).__name__ == type(stock).__name__
    assert ours.code == stock.code
    x = torch.randn(4)
    assert torch.equal(ours(x)[0], stock(x)[0])


def test_the_module_handed_in_keeps_the_code_stock_leaves_it() -> None:
    stock_in, ours_in = _graph_module(), _graph_module()
    PassManager(_passes())(stock_in)
    with cheaper_replay(), DEFERRED_RECOMPILE.scope():
        PassManager(_passes())(ours_in)
    # Stock never recompiles the edited input after the replay took over: it still adds.
    assert "aten.add.Tensor" in stock_in.code and "aten.sub.Tensor" in str(stock_in.graph)
    assert ours_in.code == stock_in.code
    assert str(ours_in.graph) == str(stock_in.graph)


def test_in_place_passes_run_as_stock() -> None:
    def add_to_mul(gm: GraphModule) -> PassResult:
        for node in gm.graph.nodes:
            if node.target is operator.add:
                node.target = operator.mul
        return PassResult(gm, True)

    stock, ours = symbolic_trace(_Model()), symbolic_trace(_Model())
    PassManager([add_to_mul])(stock)
    with DEFERRED_RECOMPILE.scope():
        result = PassManager([add_to_mul])(ours)
    assert result.graph_module is ours and type(ours).__bases__ == (GraphModule,)
    assert ours.code == stock.code


def test_lazy_modules_made_before_the_call_stay_lazy() -> None:
    lazy = LazyGraphModule(torch.nn.Module(), copy.deepcopy(symbolic_trace(_Model()).graph))
    with DEFERRED_RECOMPILE.scope():
        result = PassManager([lambda gm: PassResult(gm, False)])(lazy)
    assert result.graph_module is lazy and isinstance(lazy, LazyGraphModule)
