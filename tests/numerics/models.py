"""Small models built to lose accuracy in a known place, for the per-layer numerics tests.

`outlier`: block1's output channel 0 is ~100x the others and block1's last op drops it. int8
gives block1's output one scale for all channels, so the seven kept channels get a handful of
levels: block1's whole-tensor SQNR looks fine (the outlier carries the energy), the damage
shows one op later (block1.2) and travels to the output. Keeping block1 in float fixes it.
"""

from __future__ import annotations

import torch

#: The culprit in `outlier`.
CULPRIT = "block1"


class DropFirstChannel(torch.nn.Module):
    """x[:, 1:]."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x[:, 1:]


class Outlier(torch.nn.Module):
    """conv -> relu -> drop channel 0 (block1), then two conv blocks and a linear layer."""

    def __init__(self) -> None:
        super().__init__()
        self.block1 = torch.nn.Sequential(torch.nn.Conv2d(3, 8, 3, padding=1), torch.nn.ReLU(), DropFirstChannel())
        self.block2 = torch.nn.Sequential(torch.nn.Conv2d(7, 8, 3, padding=1), torch.nn.ReLU())
        self.block3 = torch.nn.Sequential(torch.nn.Conv2d(8, 4, 3, stride=2, padding=1), torch.nn.ReLU())
        self.fc = torch.nn.Linear(4 * 8 * 8, 4)
        with torch.no_grad():
            self.block1[0].weight[0] *= 100.0
            self.block1[0].bias[0] = 300.0

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.fc(self.block3(self.block2(self.block1(x))).flatten(1))


def _inputs(seed: int) -> tuple[torch.Tensor]:
    generator = torch.Generator().manual_seed(seed)
    return (torch.rand(1, 3, 16, 16, generator=generator) * 2 - 1,)


def outlier() -> tuple[torch.nn.Module, tuple[torch.Tensor, ...]]:
    """The `outlier` model and its example input (a `package.module:factory` for the CLI)."""
    torch.manual_seed(0)
    return Outlier().eval(), _inputs(1)


def calibration() -> list[tuple[torch.Tensor, ...]]:
    """Calibration batches for `outlier`: the example input and three more."""
    return [_inputs(seed) for seed in (1, 2, 3, 4)]


class NothingToQuantize(torch.nn.Module):
    """Only an op no quantizer annotates."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.argmax(x, dim=1)


def nothing_to_quantize() -> tuple[torch.nn.Module, tuple[torch.Tensor, ...]]:
    """A model with no quantizable layer."""
    return NothingToQuantize().eval(), (torch.rand(1, 8),)


class TwoLinear(torch.nn.Module):
    """Two 64x64 linear layers (weights large enough for Core ML to compress)."""

    def __init__(self) -> None:
        super().__init__()
        self.first = torch.nn.Linear(64, 64)
        self.second = torch.nn.Linear(64, 64)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.second(torch.relu(self.first(x)))


def two_linear() -> tuple[torch.nn.Module, tuple[torch.Tensor, ...]]:
    """`TwoLinear` and its example input."""
    torch.manual_seed(0)
    generator = torch.Generator().manual_seed(5)
    return TwoLinear().eval(), (torch.rand(1, 64, generator=generator) * 2 - 1,)
