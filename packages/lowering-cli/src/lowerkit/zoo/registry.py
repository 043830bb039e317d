"""The zoo's registry: each catalogue entry's model, its factory and its inputs."""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, field

import torch

from lowerkit.pass_infra.helpers.suggest import did_you_mean
from lowerkit.zoo import cnn, transformer
from lowerkit.zoo.catalogue import ENTRIES, ZooEntry

Inputs = tuple[torch.Tensor, ...]


@dataclass(frozen=True)
class ZooModel:
    """A zoo entry: builds a fresh eval-mode module with seeded random weights."""

    name: str
    description: str
    build_module: Callable[[], torch.nn.Module] = field(repr=False)
    make_inputs: Callable[[torch.Generator], Inputs] = field(repr=False)
    #: Backend families the model is meant for ("coreml", "arm").
    backends: tuple[str, ...] = ("coreml", "arm")
    seed: int = 0

    def module(self) -> torch.nn.Module:
        """A new instance in eval mode; the same weights every call, on every machine.

        Weights are drawn by `portable_init` (bit-identical whatever the CPU's vector unit).
        BatchNorm statistics are set from a batch of sample inputs, so that activations keep
        their scale through the network (with fresh statistics they fade layer by layer, and
        a deep model's output would not depend on its input).
        """
        with torch.random.fork_rng(devices=[]):
            torch.manual_seed(self.seed)
            module = self.build_module()
        portable_init(module, torch.Generator().manual_seed(self.seed))
        _settle_batch_norm(module, self.calibration(BATCH_NORM_SAMPLES, seed=BATCH_NORM_SEED + self.seed))
        return module.eval()

    def example_inputs(self) -> Inputs:
        """One deterministic batch of inputs."""
        return self.make_inputs(torch.Generator().manual_seed(self.seed))

    def calibration(self, count: int = 8, seed: int = 1) -> list[Inputs]:
        """`count` deterministic input batches for calibrating quantization."""
        generator = torch.Generator().manual_seed(seed)
        return [self.make_inputs(generator) for _ in range(count)]

    def parameter_count(self) -> int:
        """Number of parameters, tied tensors counted once."""
        return sum(p.numel() for p in self.module().parameters())


#: Sample inputs (one batch) that set the zoo models' BatchNorm statistics, and their seed.
BATCH_NORM_SAMPLES = 16
BATCH_NORM_SEED = 10_000
_BATCH_NORMS = (torch.nn.BatchNorm1d, torch.nn.BatchNorm2d, torch.nn.BatchNorm3d)


_NORMS = (*_BATCH_NORMS, torch.nn.LayerNorm, torch.nn.GroupNorm)
_WEIGHTED = (torch.nn.Linear, torch.nn.Conv1d, torch.nn.Conv2d, torch.nn.Conv3d)
#: Standard deviation of parameters that no layer type above owns (e.g. position embeddings).
OTHER_PARAMETER_STD = 0.02


def portable_init(module: torch.nn.Module, generator: torch.Generator) -> None:
    """Redraw every parameter with arithmetic that gives the same bits on every CPU.

    PyTorch's own initializers (``uniform_``'s ``from + (to - from) * u``, ``normal_``'s
    Box-Muller) are vectorized differently per CPU capability (AVX-512, AVX2, scalar) and
    round differently, so the same seed gives other weights on another machine. Here every
    value is ``(u * 2 - 1) * bound`` with ``u`` from ``torch.rand`` (exact multiples of 2^-24)
    and each operation rounded on its own, which IEEE arithmetic makes the same everywhere.
    Distributions: Linear / Conv weights and biases U(-1/sqrt(fan_in), 1/sqrt(fan_in)) as
    PyTorch's default; embeddings unit variance; norms keep their constant init; any other
    parameter has standard deviation ``OTHER_PARAMETER_STD``. Tied parameters are drawn once.
    """
    seen: set[int] = set()

    def draw(parameter: torch.Tensor, bound: float) -> None:
        if id(parameter) in seen:
            return
        seen.add(id(parameter))
        with torch.no_grad():
            values = torch.rand(parameter.shape, generator=generator, dtype=torch.float32)
            parameter.copy_(values.mul_(2).sub_(1).mul_(bound))

    for owner in module.modules():
        if isinstance(owner, _WEIGHTED):
            bound = 1.0 / math.sqrt(owner.weight[0].numel())
            draw(owner.weight, bound)
            if owner.bias is not None:
                draw(owner.bias, bound)
        elif isinstance(owner, torch.nn.Embedding):
            draw(owner.weight, math.sqrt(3.0))
        elif isinstance(owner, _NORMS):
            seen.update(id(p) for p in owner.parameters(recurse=False))
    for parameter in module.parameters():
        draw(parameter, OTHER_PARAMETER_STD * math.sqrt(3.0))


def _settle_batch_norm(module: torch.nn.Module, samples: list[Inputs]) -> None:
    """Set every BatchNorm's running mean and variance to its statistics over `samples`.

    The statistics come from a float64 forward pass rounded to bfloat16's 8-bit mantissa:
    float32 sums differ in their last bits from one CPU capability to another, float64 ones
    only far below that rounding, so the result is the same on every machine.
    """
    norms = [m for m in module.modules() if isinstance(m, _BATCH_NORMS)]
    if not norms:
        return
    batch = tuple(torch.cat(parts) for parts in zip(*samples, strict=True))
    momenta = [norm.momentum for norm in norms]
    for norm in norms:
        norm.reset_running_stats()
        norm.momentum = None  # a cumulative average: one batch sets the statistics exactly
    module.double().train()
    with torch.no_grad():
        module(*(t.double() if t.is_floating_point() else t for t in batch))
    module.float()
    for norm, momentum in zip(norms, momenta, strict=True):
        norm.momentum = momentum
        for stat in (norm.running_mean, norm.running_var):
            if stat is not None:
                stat.copy_(stat.to(torch.bfloat16).to(torch.float32))
    module.eval()


def _image(shape: tuple[int, ...]) -> Callable[[torch.Generator], Inputs]:
    def make(generator: torch.Generator) -> Inputs:
        return (torch.rand(shape, generator=generator) * 2 - 1,)

    return make


def _tokens(vocab: int, length: int) -> Callable[[torch.Generator], Inputs]:
    def make(generator: torch.Generator) -> Inputs:
        return (torch.randint(0, vocab, (1, length), generator=generator),)

    return make


def _token_inputs(shape: tuple[int, ...]) -> Callable[[torch.Generator], Inputs]:
    return _tokens(transformer.VOCAB_SIZE, shape[1])


#: Each catalogue entry's module class and its inputs' maker (from the entry's input shape); the
#: name, description, input shape and backends are the catalogue's (`lowerkit.zoo.catalogue`).
_BUILDERS: dict[str, tuple[Callable[[], torch.nn.Module], Callable[[tuple[int, ...]], Callable[[torch.Generator], Inputs]]]] = {
    "conv_linear": (cnn.ConvLinear, _image),
    "cnn9_layernorm": (cnn.Cnn9LayerNorm, _image),
    "resnet8": (cnn.ResNet8, _image),
    "mobilenet_v1_025": (cnn.MobileNetV1, _image),
    "ds_cnn": (cnn.DsCnn, _image),
    "tiny_lm": (transformer.TinyLM, _token_inputs),
}


def _model(entry: ZooEntry) -> ZooModel:
    build, inputs = _BUILDERS[entry.name]
    (shape,) = entry.input_shapes
    return ZooModel(entry.name, entry.description, build, inputs(shape), backends=entry.backends)


_MODELS: dict[str, ZooModel] = {entry.name: _model(entry) for entry in ENTRIES}


def names() -> list[str]:
    """All zoo model names, in a stable order."""
    return list(_MODELS)


def models() -> list[ZooModel]:
    """All zoo models, in a stable order."""
    return list(_MODELS.values())


def get(name: str) -> ZooModel:
    """The zoo model called `name`; a KeyError naming the valid ones otherwise."""
    try:
        return _MODELS[name]
    except KeyError:
        raise KeyError(
            f"unknown zoo model '{name}'.{did_you_mean(name, list(_MODELS))} Valid names: {', '.join(_MODELS)}"
        ) from None
