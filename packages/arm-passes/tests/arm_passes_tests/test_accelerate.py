"""accelerated_arm_pipeline makes ExecuTorch's own lowering use the fast pipeline, with the same bytes."""

from __future__ import annotations

from typing import Any

import pytest
from executorch.exir import to_edge_transform_and_lower
from executorch.exir.dialects._ops import ops as exir_ops
from executorch.exir.pass_base import ExportPass

from lowerkit.arm_passes import (
    FastArmPassManager,
    _upstream,
    accelerated_arm_pipeline,
    arm_pipeline_passes,
    compile_spec_for,
    lower_to_arm,
)
from lowerkit.arm_passes.devices import partitioner_for
from lowerkit.pass_infra import PassEquivalenceError, Patch, Replacement
from lowerkit.pass_infra.accelerations.replay_engine import in_pipeline


def _lower(program: Any, target: str) -> tuple[bytes, list[bytes]]:
    flatbuffers: list[bytes] = []
    with _upstream.capture_tosa_flatbuffers(flatbuffers):
        edge = to_edge_transform_and_lower(program, partitioner=[partitioner_for(compile_spec_for(target))])
        pte = bytes(edge.to_executorch().buffer)
    return pte, flatbuffers


def test_stock_script_gets_fast_pipeline_and_same_bytes(permute_net: Any) -> None:
    import torch

    model, example, _ = permute_net
    program = torch.export.export(model, example)
    stock_pte, stock_tosa = _lower(program, "TOSA-1.0+FP")
    with accelerated_arm_pipeline() as reports:
        fast_pte, fast_tosa = _lower(torch.export.export(model, example), "TOSA-1.0+FP")
    assert len(reports) == 1
    names = [r.name for r in reports[0].rows]
    expected = [type(p).__name__ for p in arm_pipeline_passes("TOSA-1.0+FP")]
    assert [n.removeprefix("Incremental") for n in names] == expected
    assert fast_tosa == stock_tosa and fast_pte == stock_pte
    assert {r.changed for r in reports[0].rows} == {None}  # not asked for: no graph snapshots
    with accelerated_arm_pipeline(track_changes=True) as tracked:
        tracked_pte, _ = _lower(torch.export.export(model, example), "TOSA-1.0+FP")
    assert tracked_pte == stock_pte
    assert any(r.changed for r in tracked[0].rows) and not all(r.changed for r in tracked[0].rows)


def test_patch_is_restored_even_after_an_error() -> None:
    from executorch.backends.arm import _passes

    before = _passes.ArmPassManager
    with pytest.raises(RuntimeError), accelerated_arm_pipeline():
        assert _passes.ArmPassManager is not before
        built = _passes.ArmPassManager(compile_spec_for("TOSA-1.0+FP"))
        assert isinstance(built, FastArmPassManager)
        raise RuntimeError("boom")
    assert _passes.ArmPassManager is before


@pytest.mark.parametrize("target", ["TOSA-1.0+INT"])
def test_verify_mode_and_lower_to_arm_match_unaccelerated(permute_net: Any, target: str) -> None:
    """lower_to_arm against itself unaccelerated (``stock=True``: lowerkit's driver, ExecuTorch's
    pipeline); against ExecuTorch's public API only: tests/arm and tests/arm_targets."""
    model, example, calibration = permute_net
    unaccelerated = lower_to_arm(model, example, target, calibration=calibration, stock=True)
    fast = lower_to_arm(model, example, target, calibration=calibration, verify=True)
    assert fast.pte == unaccelerated.pte
    assert fast.tosa_flatbuffers == unaccelerated.tosa_flatbuffers
    assert fast.report is not None
    ran = [r for r in fast.report.rows if r.ran]
    assert 0 < len(ran) < len(fast.report.rows)


_STOCK_CALL_OPERATOR = ExportPass.call_operator


def _mul_as_add(self: Any, op: Any, args: Any, kwargs: Any, meta: Any) -> Any:
    """A deliberately wrong acceleration: inside a pass pipeline, ExportPass replays mul as add."""
    if in_pipeline() and op == exir_ops.edge.aten.mul.Tensor:
        op = exir_ops.edge.aten.add.Tensor
    return _STOCK_CALL_OPERATOR(self, op, args, kwargs, meta)


WRONG_ACCELERATION = Patch("planted wrong acceleration", lambda: [Replacement(ExportPass, "call_operator", _mul_as_add)])


def test_verify_mode_compares_with_stock_inside_the_accelerated_scopes(permute_net: Any) -> None:
    import torch

    model, example, _ = permute_net
    with WRONG_ACCELERATION.scope(), pytest.raises(PassEquivalenceError) as caught:
        with accelerated_arm_pipeline(verify=True):
            _lower(torch.export.export(model, example), "TOSA-1.0+FP")
    assert "add" in caught.value.node  # the fast side's node


class _AttentionBlock:
    """A pre-norm attention + MLP block: LayerNorm, softmax, matmuls, GELU, a scalar scale."""

    @staticmethod
    def build() -> Any:
        import torch

        class Block(torch.nn.Module):
            def __init__(self) -> None:
                super().__init__()
                self.norm = torch.nn.LayerNorm(16)
                self.qkv = torch.nn.Linear(16, 48)
                self.mlp = torch.nn.Sequential(torch.nn.Linear(16, 32), torch.nn.GELU(), torch.nn.Linear(32, 16))

            def forward(self, x: torch.Tensor) -> torch.Tensor:
                q, k, v = self.qkv(self.norm(x)).chunk(3, dim=-1)
                attention = torch.softmax(q @ k.transpose(-1, -2) * 0.25, dim=-1) @ v
                x = x + attention
                return x + self.mlp(self.norm(x))

        torch.manual_seed(0)
        return Block().eval(), (torch.randn(1, 8, 16),)


@pytest.mark.parametrize("target", ["TOSA-1.0+INT", "ethos-u55-128"])
def test_accelerated_arm_quantization_prepares_the_stock_module(target: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """transform_for_annotation through FastGraphModulePassManager: the prepared module is stock's
    (graph, node names, code, outputs), and its targeted passes did fast-copy."""
    import torch
    from executorch.exir.pass_base import ProxyValue
    from torchao.quantization.pt2e.quantize_pt2e import prepare_pt2e

    import lowerkit.pass_infra.framework.targeted_pass as targeted_pass
    from lowerkit.arm_passes import accelerated_arm_quantization
    from lowerkit.arm_passes.devices import quantizer_for
    from lowerkit.pass_infra.framework.compare import first_difference

    model, example = _AttentionBlock.build()
    program = torch.export.export(model, example)

    def prepare() -> Any:
        return prepare_pt2e(program.module(check_guards=False), quantizer_for(compile_spec_for(target)))

    stock = prepare()
    copied: list[str] = []
    fast_copy_node = targeted_pass.fast_copy_node

    def counting(interpreter: Any, plan: Any, node: Any) -> Any:
        result = fast_copy_node(interpreter, plan, node)
        if isinstance(result, ProxyValue):  # else: the node replays
            copied.append(node.name)
        return result

    monkeypatch.setattr(targeted_pass, "fast_copy_node", counting)
    with accelerated_arm_quantization():
        fast = prepare()
    assert copied, "no targeted pass of transform_for_annotation fast-copied a node"
    assert first_difference(stock, fast) is None
    assert [n.name for n in stock.graph.nodes] == [n.name for n in fast.graph.nodes]
    assert stock.code == fast.code
    assert torch.equal(stock(*example), fast(*example))


def test_tosa_preprocess_is_left_stock_on_unproven_versions(monkeypatch: pytest.MonkeyPatch) -> None:
    from executorch.backends.arm.tosa.backend import TOSABackend

    from lowerkit.arm_passes._upstream_tosa_preprocess import TOSA_PREPROCESS
    from lowerkit.pass_infra.accelerations import versions

    stock = TOSABackend.__dict__["_preprocess"]
    with _upstream.capture_tosa_flatbuffers([]):  # proven: the patch is installed
        assert TOSA_PREPROCESS.active() and TOSABackend.__dict__["_preprocess"] is not stock
    monkeypatch.setattr(versions, "installed_versions", lambda names: {n: "999.0" for n in names})
    monkeypatch.delenv(versions.ALLOW_UNPROVEN_ENV, raising=False)
    monkeypatch.setattr(versions, "_warned", set())
    with pytest.warns(versions.UnprovenVersionWarning, match="TOSABackend._preprocess"):
        with _upstream.capture_tosa_flatbuffers([]):
            assert not TOSA_PREPROCESS.installed and TOSABackend.__dict__["_preprocess"] is stock
