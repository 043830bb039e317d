"""Calibration data: saved input tensors, the zoo's sampler, or random data (with a warning)."""

from __future__ import annotations

from pathlib import Path

import torch

from lowerkit.cli.errors import UsageError
from lowerkit.cli.sources.model import Inputs, ModelSource

DEFAULT_BATCHES = 8


def load(path: Path | None, source: ModelSource, *, warn: list[str]) -> list[Inputs]:
    """Calibration batches for `source`, checked against its example inputs."""
    if path is None:
        if source.sampler is not None:
            return source.sampler(DEFAULT_BATCHES)
        warn.append(
            "no --calibration given and the model has no sampler: calibrating on random data, "
            "so quantized accuracy will be poor"
        )
        generator = torch.Generator().manual_seed(0)
        return [_random_like(source.example_inputs, generator) for _ in range(DEFAULT_BATCHES)]
    if not path.exists():
        raise UsageError(f"calibration path '{path}' does not exist")
    files = sorted(path.glob("*.pt")) if path.is_dir() else [path]
    if not files:
        raise UsageError(f"calibration folder '{path}' holds no .pt files")
    batches: list[Inputs] = []
    for file in files:
        batches.extend(_read(file))
    for index, batch in enumerate(batches):
        _check(batch, source.example_inputs, f"{path} (batch {index})")
    return batches


def _read(file: Path) -> list[Inputs]:
    try:
        loaded = torch.load(file, map_location="cpu", weights_only=True)
    except Exception as error:
        raise UsageError(f"cannot read calibration file '{file}': {type(error).__name__}") from None
    if isinstance(loaded, torch.Tensor):
        return [(loaded,)]
    if isinstance(loaded, tuple) and all(isinstance(t, torch.Tensor) for t in loaded):
        return [loaded]
    if isinstance(loaded, list) and all(isinstance(b, tuple | torch.Tensor) for b in loaded):
        return [b if isinstance(b, tuple) else (b,) for b in loaded]
    raise UsageError(
        f"calibration file '{file}' must hold a tensor, a tuple of tensors or a list of tuples"
    )


def _check(batch: Inputs, example: Inputs, where: str) -> None:
    if len(batch) != len(example):
        raise UsageError(f"calibration {where} has {len(batch)} inputs, the model takes {len(example)}")
    for position, (got, want) in enumerate(zip(batch, example, strict=True)):
        if not isinstance(got, torch.Tensor) or got.shape != want.shape or got.dtype != want.dtype:
            shape = tuple(got.shape) if isinstance(got, torch.Tensor) else type(got).__name__
            raise UsageError(
                f"calibration {where} input {position} is {shape} "
                f"{getattr(got, 'dtype', '')}, the model expects {tuple(want.shape)} {want.dtype}"
            )


def _random_like(example: Inputs, generator: torch.Generator) -> Inputs:
    batch = []
    for tensor in example:
        if tensor.is_floating_point():
            batch.append(torch.randn(tensor.shape, generator=generator, dtype=tensor.dtype))
        else:
            high = int(tensor.max()) + 1 if tensor.numel() else 2
            batch.append(torch.randint(0, max(high, 2), tensor.shape, generator=generator, dtype=tensor.dtype))
    return tuple(batch)
