"""lifted_constants proven live: ExecuTorch's constant lift re-points RMSNorm's ``mean + eps``
(``ScalarToTensorPass`` made ``eps`` a tensor constant) to a placeholder; inside
accelerated_lowering() the call stays vouched for, so the Core ML delegate holding it reuses its
recorded value in ``to_executorch`` (no fake-kernel run), and stock's ``to_executorch`` of the very
manager gives the same program, metadata and .pte bytes (two Core ML lowerings never give the same
payload: its identifier is a UUID)."""

from __future__ import annotations

from typing import Any

import coremltools
import torch
from executorch.backends.apple.coreml.compiler import CoreMLBackend
from executorch.backends.apple.coreml.partition import CoreMLPartitioner
from executorch.exir import to_edge, to_edge_transform_and_lower

from lowerkit.pass_infra import accelerated_lowering
from lowerkit.pass_infra.accelerations.replay_engine import is_vouched, is_vouched_copy
from pass_infra.test_delegate_values import (
    _delegate_calls,
    _delegated,
    _vouched,
    assert_stocks_to_executorch_gives,
)
from pass_infra.test_whole_lowering import _meta_mismatches


class _RMSNorm(torch.nn.Module):
    """Llama's RMSNorm, then a linear layer: the scalar ``eps`` becomes a lifted tensor constant."""

    def __init__(self) -> None:
        super().__init__()
        self.weight = torch.nn.Parameter(torch.ones(16))
        self.linear = torch.nn.Linear(16, 16)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        normed = x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + 1e-5)
        return self.linear(normed * self.weight)


def _lowered() -> Any:
    torch.manual_seed(0)
    program = torch.export.export(_RMSNorm().eval(), (torch.randn(2, 16),))
    specs = CoreMLBackend.generate_compile_specs(minimum_deployment_target=coremltools.target.iOS18)
    return to_edge_transform_and_lower(program, partitioner=[CoreMLPartitioner(compile_specs=specs)])


def _eps_additions(program: Any) -> list[torch.fx.Node]:
    """The delegated program's additions that read a lifted constant (a placeholder)."""
    add = str(torch.ops.aten.add.Tensor)
    return [
        n
        for n in program.graph.nodes
        if n.op == "call_function" and str(getattr(n.target, "_op", n.target)) == add
        and any(a.op == "placeholder" for a in n.all_input_nodes)
    ]


def test_a_call_reading_a_lifted_constant_stays_vouched_and_gives_stocks_program_and_bytes(
    fake_kernel_runs: list[Any],
) -> None:
    with accelerated_lowering():
        edge = _lowered()
        (call,) = _delegate_calls(edge)
        additions = _eps_additions(_delegated(edge, call))
        assert additions and all(is_vouched(n) or is_vouched_copy(n) for n in additions)
        assert _vouched(call)
        fake_kernel_runs.clear()
        fast = edge.to_executorch()
    assert fake_kernel_runs == []
    assert_stocks_to_executorch_gives(edge, fast, fake_kernel_runs)


def test_the_lift_itself_is_stocks() -> None:
    """``to_edge``'s program is stock's: the patch only keeps the replay engine's records."""
    torch.manual_seed(0)
    program = torch.export.export(_RMSNorm().eval(), (torch.randn(2, 16),))
    stock = to_edge(program).exported_program()
    with accelerated_lowering():
        fast = to_edge(program).exported_program()
    lifted = [n for n in fast.graph.nodes if n.op == "placeholder" and n.name.startswith("_lifted_tensor_constant")]
    assert lifted  # the lift ran
    assert fast.graph_module.code == stock.graph_module.code
    assert _meta_mismatches(stock.graph_module, fast.graph_module) == []
    assert fast.graph_signature == stock.graph_signature
    assert fast.state_dict.keys() == stock.state_dict.keys()
    assert all(torch.equal(fast.state_dict[k], v) for k, v in stock.state_dict.items())
