"""delegate_values proven live: in ``to_executorch`` inside accelerated_lowering(), a delegate
call whose lowered program computes its recorded value is not run through ExecuTorch's fake
kernel (which unlifts and runs the whole program), and the program (code, metadata) and .pte
bytes are stock's; a program
whose value is not vouched for, is not the call's, or requires grad runs it as stock does."""

from __future__ import annotations

from typing import Any

import pytest
import torch
from executorch.backends.xnnpack.partition.xnnpack_partitioner import XnnpackPartitioner
from executorch.exir import to_edge_transform_and_lower

from lowerkit.pass_infra import _upstream, accelerated_lowering
from lowerkit.pass_infra.accelerations.delegate_values import delegate_call_value
from lowerkit.pass_infra.accelerations.replay_engine import is_vouched, is_vouched_copy
from numerics.models import TwoLinear
from pass_infra.test_whole_lowering import _meta_mismatches


def _edge(trainable: bool = False) -> Any:
    """The model lowered to XNNPACK; with `trainable` weights its values require grad."""
    torch.manual_seed(0)
    module = TwoLinear(8, 4).eval().requires_grad_(trainable)
    program = torch.export.export(module, (torch.randn(2, 8),))
    return to_edge_transform_and_lower(program, partitioner=[XnnpackPartitioner()])


def _vouched(call: torch.fx.Node) -> bool:
    return delegate_call_value(call, lambda node: is_vouched(node) or is_vouched_copy(node)) is not None


def _delegate_calls(edge: Any) -> list[torch.fx.Node]:
    call = _upstream.executorch_call_delegate()
    return [n for n in edge.exported_program().graph.nodes if n.target is call]


@pytest.fixture
def fake_kernel_runs(monkeypatch: pytest.MonkeyPatch) -> list[Any]:
    """The lowered modules whose original program ExecuTorch's fake kernel unlifts (``.module()``)."""
    runs: list[Any] = []
    stock = torch.export.ExportedProgram.module

    def counting(self: Any, *args: Any, **kwargs: Any) -> Any:
        runs.append(self)
        return stock(self, *args, **kwargs)

    monkeypatch.setattr(torch.export.ExportedProgram, "module", counting)
    return runs


def test_a_vouched_delegate_call_keeps_its_value_and_gives_stocks_program_and_bytes(
    fake_kernel_runs: list[Any],
) -> None:
    stock = _edge().to_executorch()
    assert fake_kernel_runs  # stock runs the fake kernel
    with accelerated_lowering():
        edge = _edge()
        calls = _delegate_calls(edge)
        assert calls and all(_vouched(c) for c in calls)
        fake_kernel_runs.clear()
        fast = edge.to_executorch()
    assert fake_kernel_runs == []
    assert fast.exported_program().graph_module.code == stock.exported_program().graph_module.code
    assert _meta_mismatches(stock.exported_program().graph_module, fast.exported_program().graph_module) == []
    assert bytes(fast.buffer) == bytes(stock.buffer)


def test_a_delegate_call_whose_value_is_not_the_programs_runs_the_fake_kernel(fake_kernel_runs: list[Any]) -> None:
    stock_pte = bytes(_edge().to_executorch().buffer)
    with accelerated_lowering():
        edge = _edge()
        (call,) = _delegate_calls(edge)
        program = edge.exported_program().graph_module.get_submodule(str(call.args[0].target)).original_module
        output = next(n for n in program.graph.nodes if n.op == "output").args[0][0]
        output.meta["val"] = output.meta["val"].clone()  # another value object than the call's
        assert not _vouched(call)
        fake_kernel_runs.clear()
        fast_pte = bytes(edge.to_executorch().buffer)
    assert fake_kernel_runs
    assert fast_pte == stock_pte


def test_a_delegate_call_whose_value_requires_grad_runs_the_fake_kernel(fake_kernel_runs: list[Any]) -> None:
    """ExecuTorch's kernel runs the program without autograd: its outputs do not require grad,
    whatever the recorded value (from trainable weights) says."""
    stock_pte = bytes(_edge(trainable=True).to_executorch().buffer)
    with accelerated_lowering():
        edge = _edge(trainable=True)
        (call,) = _delegate_calls(edge)
        assert not _vouched(call)
        fast_pte = bytes(edge.to_executorch().buffer)
    assert fast_pte == stock_pte
