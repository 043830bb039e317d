"""A tiny causal transformer LM whose embedding table is tied to its output head."""

from __future__ import annotations

import math

import torch
from torch import nn

VOCAB_SIZE = 256
CONTEXT = 16
WIDTH = 64
HEADS = 4
LAYERS = 2


class _Attention(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.qkv = nn.Linear(WIDTH, 3 * WIDTH)
        self.out = nn.Linear(WIDTH, WIDTH)
        # A boolean mask filled in with masked_fill: an additive -inf mask would be an input
        # of the add that static quantizers observe, and give them an infinite range.
        future = torch.ones(CONTEXT, CONTEXT, dtype=torch.bool).triu(1)
        self.register_buffer("future", future, persistent=False)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        batch, length, _ = x.shape
        head = WIDTH // HEADS
        q, k, v = self.qkv(x).split(WIDTH, dim=-1)
        q, k, v = (t.reshape(batch, length, HEADS, head).transpose(1, 2) for t in (q, k, v))
        scores = (q @ k.transpose(-2, -1) / math.sqrt(head)).masked_fill(self.future[:length, :length], float("-inf"))
        y = torch.softmax(scores, dim=-1) @ v
        return self.out(y.transpose(1, 2).reshape(batch, length, WIDTH))


class _Block(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.norm1 = nn.LayerNorm(WIDTH)
        self.attention = _Attention()
        self.norm2 = nn.LayerNorm(WIDTH)
        self.mlp = nn.Sequential(nn.Linear(WIDTH, 4 * WIDTH), nn.GELU(), nn.Linear(4 * WIDTH, WIDTH))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x + self.attention(self.norm1(x))
        return x + self.mlp(self.norm2(x))


class TinyLM(nn.Module):
    """Token ids (1, 16) -> logits (1, 16, 256); `head.weight is embedding.weight`."""

    def __init__(self) -> None:
        super().__init__()
        self.embedding = nn.Embedding(VOCAB_SIZE, WIDTH)
        self.position = nn.Parameter(torch.randn(CONTEXT, WIDTH) * 0.02)
        self.blocks = nn.Sequential(*(_Block() for _ in range(LAYERS)))
        self.norm = nn.LayerNorm(WIDTH)
        self.head = nn.Linear(WIDTH, VOCAB_SIZE, bias=False)
        self.head.weight = self.embedding.weight

    def forward(self, tokens: torch.Tensor) -> torch.Tensor:
        x = self.embedding(tokens) + self.position[: tokens.shape[1]]
        return self.head(self.norm(self.blocks(x)))
