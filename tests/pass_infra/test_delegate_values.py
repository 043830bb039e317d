"""delegate_values proven live: in ``to_executorch`` inside accelerated_lowering(), a delegate
call whose lowered program computes its recorded value is not run through ExecuTorch's fake
kernel (which unlifts and runs the whole program), and the program (code, metadata) and .pte
bytes are stock's, also for a delegate that owns a mutable buffer (a KV cache, as ExecuTorch's
Core ML partitioner takes it over) and for outputs recorded with grad (the kernel's come
without); a program whose value is not vouched for or is not the call's runs it as stock does."""

from __future__ import annotations

from typing import Any

import coremltools
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


def _delegated(edge: Any, call: torch.fx.Node) -> Any:
    """The original program of the lowered module `call` calls."""
    return edge.exported_program().graph_module.get_submodule(str(call.args[0].target)).original_module


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


class _Cache(torch.nn.Module):
    """A KV-cache write: the buffer's new value is an output of the program, not of the caller."""

    def __init__(self) -> None:
        super().__init__()
        self.linear = torch.nn.Linear(8, 8)
        self.register_buffer("cache", torch.zeros(4, 8))

    def forward(self, x: torch.Tensor, position: torch.Tensor) -> torch.Tensor:
        y = self.linear(x)
        self.cache.index_copy_(0, position, y)
        return self.cache.sum(0, keepdim=True) + y


def test_a_delegate_owning_its_buffer_keeps_its_value_and_gives_stocks_program_and_bytes(
    fake_kernel_runs: list[Any],
) -> None:
    """Stock's ``to_executorch`` of the very manager (Core ML payloads are not reproducible across
    two lowerings), after lowerkit's: the same program, metadata and .pte bytes."""
    from executorch.backends.apple.coreml.compiler import CoreMLBackend
    from executorch.backends.apple.coreml.partition import CoreMLPartitioner

    torch.manual_seed(0)
    program = torch.export.export(_Cache().eval(), (torch.randn(1, 8), torch.tensor([1])))
    specs = CoreMLBackend.generate_compile_specs(minimum_deployment_target=coremltools.target.iOS18)
    partitioner = CoreMLPartitioner(compile_specs=specs, take_over_mutable_buffer=True)
    with accelerated_lowering():
        edge = to_edge_transform_and_lower(program, partitioner=[partitioner])
        (call,) = _delegate_calls(edge)
        owned = _delegated(edge, call).graph_signature.buffers_to_mutate
        assert list(owned.values()) == ["cache"]
        assert _vouched(call)
        fake_kernel_runs.clear()
        fast = edge.to_executorch()
    assert fake_kernel_runs == []
    assert_stocks_to_executorch_gives(edge, fast, fake_kernel_runs)


def assert_stocks_to_executorch_gives(edge: Any, fast: Any, fake_kernel_runs: list[Any]) -> None:
    """Stock's ``to_executorch`` of `edge` (after lowerkit's gave `fast`) runs the fake kernel and
    gives the same program, metadata and .pte bytes."""
    stock = edge.to_executorch()
    assert fake_kernel_runs  # stock runs the fake kernel
    assert fast.exported_program().graph_module.code == stock.exported_program().graph_module.code
    assert _meta_mismatches(stock.exported_program().graph_module, fast.exported_program().graph_module) == []
    assert bytes(fast.buffer) == bytes(stock.buffer)


def test_a_delegate_call_whose_value_is_not_the_programs_runs_the_fake_kernel(fake_kernel_runs: list[Any]) -> None:
    stock_pte = bytes(_edge().to_executorch().buffer)
    with accelerated_lowering():
        edge = _edge()
        (call,) = _delegate_calls(edge)
        program = _delegated(edge, call)
        output = next(n for n in program.graph.nodes if n.op == "output").args[0][0]
        output.meta["val"] = output.meta["val"].clone()  # another value object than the call's
        assert not _vouched(call)
        fake_kernel_runs.clear()
        fast_pte = bytes(edge.to_executorch().buffer)
    assert fake_kernel_runs
    assert fast_pte == stock_pte


def _requires_grad(graph_module: torch.fx.GraphModule) -> list[Any]:
    return [
        [getattr(v, "requires_grad", None) for v in _upstream.pytree.tree_leaves(n.meta.get("val"))]
        for n in graph_module.graph.nodes
    ]


def test_a_delegate_call_whose_recorded_value_requires_grad_gets_the_kernels_value(
    fake_kernel_runs: list[Any],
) -> None:
    """Trainable weights: the recorded outputs require grad, ExecuTorch's kernel (no autograd)
    gives them without; the call takes its recorded values detached, as stock's kernel run gives
    them (the same program, metadata, requires_grad flags and bytes)."""
    stock = _edge(trainable=True).to_executorch()
    with accelerated_lowering():
        edge = _edge(trainable=True)
        (call,) = _delegate_calls(edge)
        assert any(v.requires_grad for v in call.meta["val"])
        assert _vouched(call)
        fake_kernel_runs.clear()
        fast = edge.to_executorch()
    assert fake_kernel_runs == []
    stock_module, fast_module = stock.exported_program().graph_module, fast.exported_program().graph_module
    assert fast_module.code == stock_module.code
    assert _meta_mismatches(stock_module, fast_module) == []
    assert _requires_grad(fast_module) == _requires_grad(stock_module)
    assert bytes(fast.buffer) == bytes(stock.buffer)
