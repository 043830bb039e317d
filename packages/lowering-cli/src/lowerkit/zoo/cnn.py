"""Convolutional zoo models: the MLPerf Tiny trio plus two small CNNs."""

from __future__ import annotations

import torch
from torch import nn


class _PooledClassifier(nn.Module):
    """A CNN whose head is global average pooling and a linear layer (its ``pool`` and ``fc``)."""

    def add_head(self, channels: int, classes: int) -> None:
        """Register ``pool`` and ``fc`` (after the layers registered so far: weights draw in that order)."""
        self.pool = nn.AdaptiveAvgPool2d(1)
        self.fc = nn.Linear(channels, classes)

    def head(self, x: torch.Tensor) -> torch.Tensor:
        """Pool, flatten and classify the features `x`."""
        return self.fc(torch.flatten(self.pool(x), 1))


class ConvLinear(_PooledClassifier):
    """Conv2d + ReLU + global pooling + Linear."""

    def __init__(self) -> None:
        super().__init__()
        self.conv = nn.Conv2d(3, 8, 3, padding=1)
        self.add_head(8, 10)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.head(torch.relu(self.conv(x)))


class ChannelLayerNorm(nn.Module):
    """LayerNorm over the channels of an NCHW tensor (permute, normalize, permute back)."""

    def __init__(self, channels: int) -> None:
        super().__init__()
        self.norm = nn.LayerNorm(channels)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.norm(x.permute(0, 2, 3, 1)).permute(0, 3, 1, 2)


class Cnn9LayerNorm(_PooledClassifier):
    """Nine conv + LayerNorm + ReLU blocks and a linear head (~50K parameters)."""

    CHANNELS = (16, 16, 24, 24, 32, 32, 32, 32, 32)
    STRIDES = (1, 1, 2, 1, 2, 1, 1, 2, 1)

    def __init__(self, in_channels: int = 3, classes: int = 10) -> None:
        super().__init__()
        blocks: list[nn.Module] = []
        previous = in_channels
        for channels, stride in zip(self.CHANNELS, self.STRIDES, strict=True):
            blocks += [
                nn.Conv2d(previous, channels, 3, stride=stride, padding=1),
                ChannelLayerNorm(channels),
                nn.ReLU(),
            ]
            previous = channels
        self.features = nn.Sequential(*blocks)
        self.add_head(previous, classes)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.head(self.features(x))


def _conv_bn(cin: int, cout: int, kernel: int, stride: int = 1, groups: int = 1) -> nn.Sequential:
    return nn.Sequential(
        nn.Conv2d(cin, cout, kernel, stride, padding=kernel // 2, groups=groups, bias=False),
        nn.BatchNorm2d(cout),
    )


class _ResidualBlock(nn.Module):
    def __init__(self, cin: int, cout: int, stride: int) -> None:
        super().__init__()
        self.conv1 = _conv_bn(cin, cout, 3, stride)
        self.conv2 = _conv_bn(cout, cout, 3)
        self.shortcut: nn.Module = (
            _conv_bn(cin, cout, 1, stride) if stride != 1 or cin != cout else nn.Identity()
        )

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = self.conv2(torch.relu(self.conv1(x)))
        return torch.relu(y + self.shortcut(x))


class ResNet8(_PooledClassifier):
    """ResNet8 from MLPerf Tiny (16/32/64 filters, three residual stacks)."""

    def __init__(self, classes: int = 10) -> None:
        super().__init__()
        self.stem = _conv_bn(3, 16, 3)
        self.stack1 = _ResidualBlock(16, 16, 1)
        self.stack2 = _ResidualBlock(16, 32, 2)
        self.stack3 = _ResidualBlock(32, 64, 2)
        self.add_head(64, classes)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = torch.relu(self.stem(x))
        return self.head(self.stack3(self.stack2(self.stack1(x))))


def _depthwise_separable(cin: int, cout: int, stride: int) -> nn.Sequential:
    return nn.Sequential(
        _conv_bn(cin, cin, 3, stride, groups=cin),
        nn.ReLU(),
        _conv_bn(cin, cout, 1),
        nn.ReLU(),
    )


class MobileNetV1(_PooledClassifier):
    """MobileNetV1 with width multiplier 0.25 (MLPerf Tiny visual wake words)."""

    # (output channels at alpha=1, stride) for the 13 depthwise-separable blocks.
    LAYOUT = (
        (64, 1), (128, 2), (128, 1), (256, 2), (256, 1), (512, 2),
        (512, 1), (512, 1), (512, 1), (512, 1), (512, 1), (1024, 2), (1024, 1),
    )  # fmt: skip

    def __init__(self, alpha: float = 0.25, classes: int = 2) -> None:
        super().__init__()
        first = int(32 * alpha)
        layers: list[nn.Module] = [_conv_bn(3, first, 3, 2), nn.ReLU()]
        previous = first
        for channels, stride in self.LAYOUT:
            width = int(channels * alpha)
            layers.append(_depthwise_separable(previous, width, stride))
            previous = width
        self.features = nn.Sequential(*layers)
        self.add_head(previous, classes)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.head(self.features(x))


class DsCnn(_PooledClassifier):
    """DS-CNN (small) from MLPerf Tiny keyword spotting: 64 filters, 4 DS blocks, 12 classes."""

    def __init__(self, filters: int = 64, classes: int = 12) -> None:
        super().__init__()
        self.stem = nn.Sequential(
            nn.Conv2d(1, filters, (10, 4), stride=2, padding=(5, 1), bias=False),
            nn.BatchNorm2d(filters),
            nn.ReLU(),
        )
        self.blocks = nn.Sequential(
            *(_depthwise_separable(filters, filters, 1) for _ in range(4))
        )
        self.add_head(filters, classes)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.head(self.blocks(self.stem(x)))
