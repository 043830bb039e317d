"""Shared helpers: a linear+embedding model, torchao weight configs, conversion via ExportedProgram."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

import coremltools as ct
import numpy as np
import pytest
import torch
from torch import nn
from torchao.prototype.quantization.codebook_coreml import CodebookQuantizedTensor
from torchao.quantization import quantize_

from lowerkit.coreml_compiler_ops import register

VOCAB, DIM, OUT = 128, 64, 32


class EmbedLinear(nn.Module):
    """An embedding table feeding a linear layer: the two weight-carrying layers the configs target."""

    def __init__(self) -> None:
        super().__init__()
        self.emb = nn.Embedding(VOCAB, DIM)
        self.lin = nn.Linear(DIM, OUT)

    def forward(self, tokens: torch.Tensor) -> torch.Tensor:
        return self.lin(self.emb(tokens))


def fresh_model(seed: int = 0) -> EmbedLinear:
    torch.manual_seed(seed)
    return EmbedLinear().eval()


def both_layers(module: nn.Module, fqn: str) -> bool:
    return isinstance(module, (nn.Embedding, nn.Linear))


def apply_config(model: nn.Module, config: Any) -> nn.Module:
    """torchao's ``quantize_`` on the embedding and the linear layer."""
    quantize_(model, config, filter_fn=both_layers)
    return model


def apply_codebook(
    model: nn.Module, code_dtype: torch.dtype, nbits: int, block_size: list[int], seed: int = 0
) -> nn.Module:
    """Codebook-quantize both weights with seeded random codes and tables.

    Same tensor subclass as ``CodebookWeightOnlyConfig`` (torchao's k-means is skipped: it takes
    seconds per table, and the translation only sees codes and codebook).
    """
    generator = torch.Generator().manual_seed(seed)
    for layer in (model.emb, model.lin):
        n, k = layer.weight.shape
        rows = n if block_size[0] == -1 else block_size[0]
        cols = k if block_size[1] == -1 else block_size[1]
        codes = torch.randint(0, 2**nbits, (n, k), generator=generator, dtype=torch.uint8)
        codebook = (
            torch.randn(n // rows, k // cols, 2**nbits, 1, generator=generator, dtype=torch.float32)
            * 0.1
        )
        quantized = CodebookQuantizedTensor(
            codes, codebook, code_dtype, block_size, layer.weight.shape, dtype=torch.float32
        )
        layer.weight = nn.Parameter(quantized, requires_grad=False)
    return model


def dequantized_weights(model: nn.Module) -> dict[str, np.ndarray]:
    """torchao's own dequantization of each quantized weight, float32."""
    with torch.no_grad():
        return {
            name: model.get_parameter(f"{name}.weight").dequantize().float().numpy()
            for name in ("emb", "lin")
        }


def tokens() -> tuple[torch.Tensor]:
    return (torch.arange(10, dtype=torch.int64).reshape(2, 5),)


def convert(
    model: nn.Module, target: Any = ct.target.iOS18, precision: Any = ct.precision.FLOAT16
) -> Any:
    """``torch.export`` then ``ct.convert`` of the ExportedProgram, as ExecuTorch's Core ML backend does."""
    program = torch.export.export(model, tokens()).run_decompositions({})
    return ct.convert(
        program,
        source="pytorch",
        convert_to="mlprogram",
        minimum_deployment_target=target,
        compute_precision=precision,
        skip_model_load=True,
    )


def constexpr_ops(mlmodel: Any) -> list[str]:
    return [
        op.op_type
        for op in mlmodel._mil_program.functions["main"].operations
        if op.op_type.startswith("constexpr_")
    ]


def by_layer(decoded: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
    """Decoded weights keyed "emb" / "lin" by shape (the two have different shapes)."""
    found = {}
    for value in decoded.values():
        if value.shape == (VOCAB, DIM):
            found["emb"] = value
        elif value.shape == (OUT, DIM):
            found["lin"] = value
    assert sorted(found) == ["emb", "lin"], {k: v.shape for k, v in decoded.items()}
    return found


def fp16_ulp(reference: np.ndarray) -> np.ndarray:
    return np.spacing(np.abs(reference.astype(np.float16))).astype(np.float32)


@pytest.fixture(autouse=True)
def registered() -> Iterator[None]:
    register()
    yield


ModelFactory = Callable[[], nn.Module]
