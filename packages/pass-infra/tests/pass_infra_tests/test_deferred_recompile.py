"""deferred_recompile: replayed modules inside a PassManager call compile once and come back as stock's;
export_deferring_recompiles gives torch.export.export's program, and is torch.export.export inside
accelerated_lowering() / accelerated_quantization() (DEFERRED_EXPORT)."""

from __future__ import annotations

import copy
import operator
import re
from collections.abc import Callable
from typing import Any

import pytest
import torch
from executorch.exir.pass_base import ExportPass
from torch.fx import GraphModule, symbolic_trace
from torch.fx.passes.infra.pass_base import PassResult
from torch.fx.passes.infra.pass_manager import PassManager

from lowerkit.pass_infra import accelerated_lowering, accelerated_quantization, cheaper_replay
from lowerkit.pass_infra._upstream import LazyGraphModule
from lowerkit.pass_infra.accelerations.deferred_export import (
    DEFERRED_EXPORT,
    export_deferring_recompiles,
)
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


# --- export_deferring_recompiles ---------------------------------------------------------------------------

_ADDRESSES = re.compile(r"graph_id=\d+|'graph_id': \d+|<eval_with_key>\.\d+| at 0x[0-9a-f]+")


class _Cnn(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.conv = torch.nn.Conv2d(3, 8, 3)
        self.bn = torch.nn.BatchNorm2d(8)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.relu(self.bn(self.conv(x))).mean((2, 3))


class _Attention(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.norm = torch.nn.LayerNorm(16)
        self.attention = torch.nn.MultiheadAttention(16, 2, batch_first=True)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = self.norm(x)
        with torch.no_grad():
            z = self.attention(y, y, y, need_weights=False)[0]
        return x + z


class _Branches(torch.nn.Module):
    """A torch.cond: its branches are nested graph modules of the program."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.cond(x.sum() > 0, lambda t: t.sin(), lambda t: t.cos() + 1, (x,))


def _program_text(program: torch.export.ExportedProgram) -> list[Any]:
    """Everything a caller reads of a program (ids and code-file numbers aside), in order."""
    out: list[Any] = [str(program.graph_signature), str(program.range_constraints), str(program.module_call_graph)]
    out += [(name, tuple(value.shape), value.sum().item()) for name, value in program.state_dict.items()]
    for name, module in program.graph_module.named_modules():
        cls = type(module)
        out.append((name, cls.__name__, cls.__bases__, isinstance(module, GraphModule) and module.code))
        if not isinstance(module, GraphModule):
            continue
        for node in module.graph.nodes:
            meta = {key: repr(value.shape if key == "val" and hasattr(value, "shape") else value)
                    for key, value in node.meta.items()}
            out.append((node.name, node.op, str(node.target), str(node.args), _ADDRESSES.sub("", str(meta))))
    return out


_EXPORTS = {
    "cnn": (_Cnn, lambda: (torch.randn(1, 3, 12, 12),)),
    "attention": (_Attention, lambda: (torch.randn(1, 5, 16),)),
    "cond": (_Branches, lambda: (torch.randn(4),)),
    "lstm": (lambda: torch.nn.LSTM(4, 8, batch_first=True), lambda: (torch.randn(1, 3, 4),)),
}


@pytest.mark.parametrize("name", sorted(_EXPORTS))
def test_export_deferring_recompiles_gives_torchs_program(name: str, monkeypatch: pytest.MonkeyPatch) -> None:
    build, inputs = _EXPORTS[name]
    torch.manual_seed(0)
    model = build().eval()
    args = inputs()
    # The first export of a process records some metadata later ones do not: compare later ones.
    torch.export.export(model, args)
    compiles = _RealCompiles(monkeypatch)
    stock = torch.export.export(model, args)
    stock_count, compiles.count = compiles.count, 0
    ours = export_deferring_recompiles(model, args)
    assert compiles.count < stock_count, (compiles.count, stock_count)
    assert _program_text(ours) == _program_text(stock)
    assert not any(isinstance(m, LazyGraphModule) for m in ours.graph_module.modules())
    assert torch.equal(ours.module()(*args)[0], stock.module()(*args)[0])


@pytest.mark.parametrize("scope", [accelerated_lowering, accelerated_quantization])
def test_scopes_make_torchs_export_the_deferring_one(
    scope: Callable[[], Any], monkeypatch: pytest.MonkeyPatch
) -> None:
    stock_export = torch.export.export
    model, args = _Attention().eval(), (torch.randn(1, 5, 16),)
    torch.export.export(model, args)  # the first export of a process records more metadata
    compiles = _RealCompiles(monkeypatch)
    stock = torch.export.export(model, args)
    stock_count, compiles.count = compiles.count, 0
    with scope():
        assert DEFERRED_EXPORT.active()
        ours = torch.export.export(model, args)  # a user's own call, looked up as the attribute
        ours_count = compiles.count
    assert ours_count < stock_count, (ours_count, stock_count)
    assert _program_text(ours) == _program_text(stock)
    assert torch.export.export is stock_export  # restored when the scope closes


class _KeywordInput(torch.nn.Module):
    def forward(self, x: torch.Tensor, *, scale: torch.Tensor) -> torch.Tensor:
        return x * scale


def test_export_deferring_recompiles_takes_what_torchs_export_takes() -> None:
    """Called as torch.export.export is (export_llama's pt2e path passes the model's keyword inputs
    positionally; torchao's pattern matcher exports strictly): the same program."""
    model, args, kwargs = _KeywordInput(), (torch.randn(3),), {"scale": torch.randn(3)}
    for call in (
        lambda export: export(model, args, kwargs),
        lambda export: export(model, args, kwargs, dynamic_shapes=None),
        lambda export: export(mod=model, args=args, kwargs=kwargs, strict=False),
        lambda export: export(model, args, kwargs, strict=True),  # Dynamo's: torch's own export
    ):
        stock, program = call(torch.export.export), call(export_deferring_recompiles)
        assert _program_text(program) == _program_text(stock)
        assert torch.equal(program.module()(*args, **kwargs), model(*args, **kwargs))
