"""Small models built to lose accuracy in a known place, for the per-layer numerics tests.

`outlier`: block1's output channel 0 is ~100x the others and block1's last op drops it. int8
gives block1's output one scale for all channels, so the seven kept channels get a handful of
levels: block1's whole-tensor SQNR looks fine (the outlier carries the energy), the damage
shows one op later (block1.2) and travels to the output. Keeping block1 in float fixes it.

The three outlier shapes of real models, each set the scale of a layer whose next op (a slice,
its own module) drops the outlier, so that in float it never matters:

- `offset`: conv `stem`'s channel 3 sits near 40 with a small spread (one large bias);
- `wide`: conv `stem`'s channel 2 has 40x larger weights (a wide spread around zero);
- `heavy_tailed`: a token layer `proj` whose channel 5 is ordinary but for one token at ~60
  (the "massive activation" of transformers), and the next op drops that token.

On Arm the slice shares the producer's quantization parameters, so keeping `stem` (or `proj`)
alone in float still quantizes its output with the outlier in range: the fix is the pair.

`residual`: two ResNet basic-block ends (a conv plus a shortcut conv, then a ReLU), where
nothing loses accuracy: the Arm pipeline moves the last conv's NHWC -> NCHW layout change (a
TRANSPOSE; a RESHAPE at 1x1 spatial) past the add and the ReLU, still named after the conv.
"""

from __future__ import annotations

import torch

#: The culprit in `outlier`.
CULPRIT = "block1"


class DropFirst(torch.nn.Module):
    """x[:, 1:]: every channel (NCHW) or token (NTC) but the first."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x[:, 1:]


class Outlier(torch.nn.Module):
    """conv -> relu -> drop channel 0 (block1), then two conv blocks and a linear layer."""

    def __init__(self) -> None:
        super().__init__()
        self.block1 = torch.nn.Sequential(torch.nn.Conv2d(3, 8, 3, padding=1), torch.nn.ReLU(), DropFirst())
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


#: The layer that sets the scale in `offset` and `wide`, and the slice after it.
STEM, PICK = "stem", "pick"
#: The layer that sets the scale in `heavy_tailed`, and the slice after it.
PROJ, DROP = "proj", "drop"


class KeepChannels(torch.nn.Module):
    """x[:, :count]: the channels before `count`."""

    def __init__(self, count: int) -> None:
        super().__init__()
        self.count = count

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x[:, : self.count]


class StemPickHead(torch.nn.Module):
    """conv `stem` (3 -> 8), `pick` (its channels 0..2), conv + relu `head` (3 -> 8)."""

    def __init__(self) -> None:
        super().__init__()
        self.stem = torch.nn.Conv2d(3, 8, 3, padding=1)
        self.pick = KeepChannels(3)
        self.head = torch.nn.Sequential(torch.nn.Conv2d(3, 8, 3, padding=1), torch.nn.ReLU())

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.head(self.pick(self.stem(x)))


def _stem_channel_3(weight_scale: float, bias: float) -> tuple[torch.nn.Module, tuple[torch.Tensor, ...]]:
    """`StemPickHead` whose stem channel 3 has its weights scaled by `weight_scale` and bias `bias`."""
    torch.manual_seed(0)
    model = StemPickHead().eval()
    with torch.no_grad():
        model.stem.weight[3] *= weight_scale
        model.stem.bias[3] = bias
    return model, _inputs(1)


def offset() -> tuple[torch.nn.Module, tuple[torch.Tensor, ...]]:
    """`StemPickHead` whose stem channel 3 sits at ~40 with a spread of ~0.1 (a large bias)."""
    return _stem_channel_3(0.05, 40.0)


def wide() -> tuple[torch.nn.Module, tuple[torch.Tensor, ...]]:
    """`StemPickHead` whose stem channel 3 has 40x larger weights (spans about +-20 around zero)."""
    return _stem_channel_3(40.0, 0.0)


TOKENS, FEATURES = 32, 16


class Spiky(torch.nn.Module):
    """A linear layer plus a fixed per-(token, feature) offset: channel 5 of token 0 at ~60."""

    def __init__(self) -> None:
        super().__init__()
        self.linear = torch.nn.Linear(FEATURES, FEATURES)
        spike = torch.zeros(TOKENS, FEATURES)
        spike[0, 5] = 60.0
        self.spike = torch.nn.Parameter(spike)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.linear(x) + self.spike


class HeavyTailed(torch.nn.Module):
    """`proj` (Spiky), `drop` (its first token), linear `head`."""

    def __init__(self) -> None:
        super().__init__()
        self.proj = Spiky()
        self.drop = DropFirst()
        self.head = torch.nn.Linear(FEATURES, FEATURES)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.head(self.drop(self.proj(x)))


def _tokens(seed: int) -> tuple[torch.Tensor]:
    generator = torch.Generator().manual_seed(seed)
    return (torch.rand(1, TOKENS, FEATURES, generator=generator) * 2 - 1,)


def heavy_tailed() -> tuple[torch.nn.Module, tuple[torch.Tensor, ...]]:
    """`HeavyTailed` and its example input."""
    torch.manual_seed(0)
    return HeavyTailed().eval(), _tokens(1)


def token_calibration() -> list[tuple[torch.Tensor, ...]]:
    """Calibration batches for `heavy_tailed`."""
    return [_tokens(seed) for seed in (1, 2, 3, 4)]


class NothingToQuantize(torch.nn.Module):
    """Only an op no quantizer annotates."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.argmax(x, dim=1)


def nothing_to_quantize() -> tuple[torch.nn.Module, tuple[torch.Tensor, ...]]:
    """A model with no quantizable layer."""
    return NothingToQuantize().eval(), (torch.rand(1, 8),)


class TwoLinear(torch.nn.Module):
    """Two linear layers with a ReLU between; 64x64 by default (weights large enough for Core ML to compress)."""

    def __init__(self, width: int = 64, out: int = 64) -> None:
        super().__init__()
        self.first = torch.nn.Linear(width, width)
        self.second = torch.nn.Linear(width, out)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.second(torch.relu(self.first(x)))


def two_linear() -> tuple[torch.nn.Module, tuple[torch.Tensor, ...]]:
    """`TwoLinear` and its example input."""
    torch.manual_seed(0)
    generator = torch.Generator().manual_seed(5)
    return TwoLinear().eval(), (torch.rand(1, 64, generator=generator) * 2 - 1,)


class Residual(torch.nn.Module):
    """relu(main(x) + shortcut(x)): a 3x3 conv and a 1x1 conv added, as a ResNet block ends."""

    def __init__(self, channels: int = 8) -> None:
        super().__init__()
        self.main = torch.nn.Conv2d(channels, channels, 3, padding=1)
        self.shortcut = torch.nn.Conv2d(channels, channels, 1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.relu(self.main(x) + self.shortcut(x))


def residual(size: int = 2) -> tuple[torch.nn.Module, tuple[torch.Tensor, ...]]:
    """Two `Residual` blocks and an example input of `size` x `size` spatial."""
    torch.manual_seed(0)
    return torch.nn.Sequential(Residual(), Residual()).eval(), (torch.randn(1, 8, size, size),)
