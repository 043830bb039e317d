"""Small models and helpers for the coreml-quantizer package tests (no ExecuTorch here)."""

from __future__ import annotations

import contextlib
import hashlib
from collections.abc import Callable, Iterator
from typing import Any

import pytest
import torch
from coremltools.optimize.torch.quantization import (
    LinearQuantizerConfig,
    ModuleLinearQuantizerConfig,
)
from torch import nn
from torchao.quantization.pt2e.quantize_pt2e import convert_pt2e

from lowerkit.coreml_quantizer import CoreMLQuantizer, prepare_pt2e


class ConvNet(nn.Module):
    """conv+bn+relu, max pool, a residual add with relu, flatten, linear."""

    def __init__(self) -> None:
        super().__init__()
        self.conv1 = nn.Conv2d(3, 8, 3, padding=1)
        self.bn = nn.BatchNorm2d(8)
        self.conv2 = nn.Conv2d(8, 8, 3, padding=1)
        self.pool = nn.MaxPool2d(2)
        self.fc = nn.Linear(8 * 4 * 4, 5)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = torch.relu(self.bn(self.conv1(x)))
        y = self.pool(y)
        y = torch.relu(self.conv2(y) + y)
        return self.fc(torch.flatten(y, 1))


class PlainConvNet(nn.Module):
    """conv+relu6, avg pool, conv+hardswish, flatten, linear (no batch norm)."""

    def __init__(self) -> None:
        super().__init__()
        self.conv1 = nn.Conv2d(3, 8, 3, padding=1)
        self.conv2 = nn.Conv2d(8, 4, 1)
        self.fc = nn.Linear(4 * 4 * 4, 5)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = torch.nn.functional.relu6(self.conv1(x))
        y = torch.nn.functional.avg_pool2d(y, 2)
        y = torch.nn.functional.hardswish(self.conv2(y))
        return self.fc(torch.flatten(y, 1))


class LinearNet(nn.Module):
    """linear+gelu, a matmul, a mul with sigmoid, linear."""

    def __init__(self) -> None:
        super().__init__()
        self.fc1 = nn.Linear(16, 16)
        self.fc2 = nn.Linear(16, 4)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = torch.nn.functional.gelu(self.fc1(x))
        y = torch.matmul(y, y.transpose(0, 1))
        y = torch.sigmoid(y * 0.5 + 0.1)
        return self.fc2(torch.matmul(y, x))


def _seeded(factory: Callable[[], nn.Module]) -> nn.Module:
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(0)
        return factory().eval()


MODELS: dict[str, tuple[Callable[[], nn.Module], tuple[int, ...]]] = {
    "conv": (ConvNet, (1, 3, 8, 8)),
    "conv_plain": (PlainConvNet, (1, 3, 8, 8)),
    "linear": (LinearNet, (4, 16)),
}


def example(name: str, seed: int = 0) -> tuple[torch.Tensor, ...]:
    """A deterministic input batch for the model ``name``."""
    return (torch.randn(MODELS[name][1], generator=torch.Generator().manual_seed(seed)),)


def exported(name: str) -> torch.fx.GraphModule:
    """The model ``name`` exported with torch.export."""
    factory, _ = MODELS[name]
    return torch.export.export(_seeded(factory), example(name)).module()


def static_config(per_channel: bool = True, scheme: str = "symmetric") -> LinearQuantizerConfig:
    """int8 weights, uint8 activations."""
    return LinearQuantizerConfig(
        global_config=ModuleLinearQuantizerConfig(
            quantization_scheme=scheme, weight_per_channel=per_channel
        )
    )


def weight_only_config(per_channel: bool = True) -> LinearQuantizerConfig:
    """int8 weights, float activations."""
    return LinearQuantizerConfig(
        global_config=ModuleLinearQuantizerConfig(
            activation_dtype=torch.float32, weight_per_channel=per_channel
        )
    )


@contextlib.contextmanager
def single_thread() -> Iterator[None]:
    previous = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        yield
    finally:
        torch.set_num_threads(previous)


def quantize(
    name: str,
    quantizer: CoreMLQuantizer,
    *,
    model: torch.fx.GraphModule | None = None,
    threads_pinned: bool = True,
) -> Any:
    """prepare_pt2e (on ``model``, or a fresh export of ``name``), calibrate on three batches, convert_pt2e."""
    context = single_thread() if threads_pinned else contextlib.nullcontext()
    with context, torch.no_grad():
        prepared = prepare_pt2e(model if model is not None else exported(name), quantizer)
        for seed in range(3):
            prepared(*example(name, seed + 1))
        return convert_pt2e(prepared)


def fingerprint(graph_module: Any) -> dict[str, Any]:
    """Graph code plus sha256 of every tensor the module holds, by name."""
    tensors: dict[str, str] = {}
    items = list(graph_module.state_dict(keep_vars=True).items())
    for node in graph_module.graph.nodes:
        if node.op == "get_attr":
            value: Any = graph_module
            for part in node.target.split("."):
                value = getattr(value, part)
            if isinstance(value, torch.Tensor):
                items.append((node.target, value))
    for name, tensor in items:
        data = tensor.detach().contiguous()
        tensors[name] = (
            f"{data.dtype} {list(data.shape)} "
            + hashlib.sha256(data.view(torch.uint8).numpy().tobytes()).hexdigest()
        )
    return {"code": graph_module.code, "tensors": dict(sorted(tensors.items()))}


@pytest.fixture
def fresh_cache() -> Iterator[None]:
    """Start with an empty process-wide pattern cache."""
    from lowerkit.coreml_quantizer import pattern_cache

    pattern_cache.clear()
    yield
