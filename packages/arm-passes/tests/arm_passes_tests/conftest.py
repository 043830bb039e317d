"""Small models and helpers shared by the arm-passes tests (kept tiny: CI budget)."""

from __future__ import annotations

from typing import Any

import pytest
import torch


class PermuteNet(torch.nn.Module):
    """Conv + channels-last LayerNorm (permute round trip) + view + linear: exercises permute propagation."""

    def __init__(self) -> None:
        super().__init__()
        torch.manual_seed(0)
        self.conv = torch.nn.Conv2d(3, 8, 3, padding=1)
        self.norm = torch.nn.LayerNorm(8)
        self.conv2 = torch.nn.Conv2d(8, 8, 3, stride=2, padding=1)
        self.head = torch.nn.Linear(8 * 4 * 4, 5)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = torch.relu(self.conv(x))
        y = self.norm(y.permute(0, 2, 3, 1)).permute(0, 3, 1, 2)
        y = torch.relu(self.conv2(y) + 0.5)
        return self.head(y.reshape(y.shape[0], -1))


@pytest.fixture(scope="session")
def permute_net() -> tuple[torch.nn.Module, tuple[torch.Tensor, ...], list[tuple[torch.Tensor, ...]]]:
    """A fresh PermuteNet, its example inputs and two calibration batches."""
    generator = torch.Generator().manual_seed(1)
    example = (torch.randn(1, 3, 8, 8, generator=generator),)
    calibration = [(torch.randn(1, 3, 8, 8, generator=generator),) for _ in range(2)]
    return PermuteNet().eval(), example, calibration


def graph_signature(graph_module: Any) -> list[tuple[Any, ...]]:
    """Everything about a graph that reaches the TOSA flatbuffer: names, ops, args, value metadata."""
    from torch.fx.node import map_arg

    rows: list[tuple[Any, ...]] = []
    for node in graph_module.graph.nodes:
        val = node.meta.get("val")
        shape = (
            (tuple(val.shape), val.dtype, tuple(val.stride()))
            if isinstance(val, torch.Tensor)
            else type(val).__name__
        )
        rows.append(
            (
                node.op,
                node.name,
                str(node.target),
                map_arg(node.args, lambda n: n.name),
                map_arg(dict(node.kwargs), lambda n: n.name),
                shape,
                sorted(k for k in node.meta if k not in ("from_node",)),
                [u.name for u in node.users],
            )
        )
    return rows
