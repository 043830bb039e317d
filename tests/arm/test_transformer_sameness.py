"""A transformer block through ExecuTorch's public Arm flow, stock and inside lowerkit's drop-ins: same bytes.

A ViT-shaped model (patch embedding, multi-head attention with view / permute / matmul /
softmax, layer norms, GELU MLP, a rank-0 tensor constant as Hugging Face attention code
makes), small enough for CI. Nearly every node is an op some Arm pass targets, so this
exercises replays of targeted nodes, not fast-copy; two blocks give the permute propagation
and the signature-lookup cache repeated layers to work across; the rank-0 constant is reshaped in place
by ``UnsqueezeScalarPlaceholdersPass`` before its replay (users' recorded values are stale
then). Also checks that every ``run_decompositions`` stays local (no whole re-trace).
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from functools import cache
from typing import Any

import torch

from bench.realworld_flows import Lowered, arm_public_api

HIDDEN, HEADS, PATCH, IMAGE = 32, 2, 8, 32


class _Block(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.norm1 = torch.nn.LayerNorm(HIDDEN)
        self.qkv = torch.nn.ModuleList(torch.nn.Linear(HIDDEN, HIDDEN) for _ in range(3))
        self.proj = torch.nn.Linear(HIDDEN, HIDDEN)
        self.norm2 = torch.nn.LayerNorm(HIDDEN)
        self.fc1 = torch.nn.Linear(HIDDEN, 2 * HIDDEN)
        self.fc2 = torch.nn.Linear(2 * HIDDEN, HIDDEN)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        batch, tokens, _ = x.shape
        h = self.norm1(x)
        q, k, v = (
            m(h).view(batch, tokens, HEADS, HIDDEN // HEADS).permute(0, 2, 1, 3) for m in self.qkv
        )
        scale = torch.tensor(float(HIDDEN // HEADS)) ** -0.5  # a rank-0 constant
        attention = torch.softmax(torch.matmul(q, k.transpose(-1, -2)) * scale, dim=-1)
        out = torch.matmul(attention, v).permute(0, 2, 1, 3).reshape(batch, tokens, HIDDEN)
        x = x + self.proj(out)
        return x + self.fc2(torch.nn.functional.gelu(self.fc1(self.norm2(x))))


class TinyViT(torch.nn.Module):
    """Patch embedding, class token, position embedding, two blocks, head."""

    def __init__(self) -> None:
        super().__init__()
        self.patch = torch.nn.Conv2d(3, HIDDEN, PATCH, stride=PATCH)
        tokens = (IMAGE // PATCH) ** 2 + 1
        self.cls = torch.nn.Parameter(torch.randn(1, 1, HIDDEN))
        self.position = torch.nn.Parameter(torch.randn(1, tokens, HIDDEN))
        self.blocks = torch.nn.Sequential(_Block(), _Block())
        self.norm = torch.nn.LayerNorm(HIDDEN)
        self.head = torch.nn.Linear(HIDDEN, 10)

    def forward(self, image: torch.Tensor) -> torch.Tensor:
        x = self.patch(image).flatten(2).transpose(1, 2)
        x = torch.cat([self.cls.expand(x.shape[0], -1, -1), x], dim=1) + self.position
        return self.head(self.norm(self.blocks(x))[:, 0])


def _model() -> tuple[torch.nn.Module, tuple[torch.Tensor, ...], list[tuple[torch.Tensor, ...]]]:
    torch.manual_seed(0)
    model = TinyViT().eval()
    inputs = (torch.randn(1, 3, IMAGE, IMAGE),)
    return model, inputs, [(torch.randn(1, 3, IMAGE, IMAGE),) for _ in range(2)]


@cache
def _lower(accelerated: bool) -> tuple[Lowered, list[Any], list[Any]]:
    """(the lowering, whole re-traces, pipeline reports) of the public-API TOSA INT flow
    (`bench.realworld_flows.arm_public_api`), stock or inside lowerkit's drop-in scopes."""
    from lowerkit.arm_passes import accelerated_arm_pipeline
    from lowerkit.pass_infra import accelerated_quantization, decomposition_fallbacks
    from lowerkit.pass_infra.accelerations.signature_lookups import SIGNATURE_LOOKUPS

    fallbacks: list[Any] = []
    reports: list[Any] = []

    @contextlib.contextmanager
    def drop_ins() -> Iterator[None]:
        with decomposition_fallbacks() as found, accelerated_arm_pipeline() as made:
            assert SIGNATURE_LOOKUPS.active()
            yield
        fallbacks.extend(found)
        reports.extend(made)

    model, inputs, calibration = _model()
    if not accelerated:
        assert not SIGNATURE_LOOKUPS.active()
        return arm_public_api(model, inputs, "TOSA-1.0+INT", calibration), [], []
    lowered = arm_public_api(
        model, inputs, "TOSA-1.0+INT", calibration, quantization_scope=accelerated_quantization, lowering_scope=drop_ins
    )
    return lowered, fallbacks, reports


def test_transformer_same_tosa_and_pte_as_stock() -> None:
    fast, _, reports = _lower(True)
    stock, _, _ = _lower(False)
    assert reports, "the accelerated Arm pipeline did not run"
    assert stock.payloads and fast.payloads == stock.payloads  # the TOSA flatbuffers
    assert fast.pte == stock.pte


def test_transformer_decompositions_say_why_they_re_trace() -> None:
    _, fallbacks, _ = _lower(True)
    # torch.tensor() in forward leaves lift_fresh_copy + detach_ (an in-place op) in the program.
    assert fallbacks and fallbacks[0].reason == "aten.detach_.default mutates"
    assert all(f.reason and f.nodes > 0 for f in fallbacks)
