"""Pass bisection: the interpreter reproduces every state of the clean pipeline, and a pass bug
built on purpose is named exactly (tiny model: each case is one lowering)."""

from __future__ import annotations

import contextlib
import functools
from typing import Any

import pytest
import torch
from executorch.exir.dialects._ops import ops as exir_ops

from arm_passes_tests.pass_bugs import NegateOneWeightPass, ScaleOneOutputQParamPass
from lowerkit.arm_passes import _upstream, compile_spec_for, lower_to_arm
from lowerkit.arm_passes.lowering import ArmLowering
from lowerkit.arm_passes.numerics.bisect import PassBisection, bisect_passes, bisect_recorded
from lowerkit.arm_passes.numerics.pass_states import PassState, record_pass_states
from lowerkit.arm_passes.numerics.tosa_torch import TOSA_IN_TORCH
from lowerkit.arm_passes.runner import FastArmPassManager, passes_inserted_after


class Tiny(torch.nn.Module):
    """conv, depthwise conv, residual add, max pool, average pool, sigmoid (TABLE), linear."""

    def __init__(self) -> None:
        super().__init__()
        torch.manual_seed(0)
        self.conv = torch.nn.Conv2d(3, 8, 3, padding=1)
        self.depthwise = torch.nn.Conv2d(8, 8, 3, padding=1, groups=8)
        self.head = torch.nn.Linear(8 * 2 * 2, 4)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = torch.relu(self.conv(x))
        y = torch.nn.functional.max_pool2d(y + torch.relu(self.depthwise(y)), 2)
        y = torch.sigmoid(torch.nn.functional.avg_pool2d(y, 2))
        return self.head(y.flatten(1))


def _tiny() -> tuple[torch.nn.Module, tuple[torch.Tensor, ...]]:
    generator = torch.Generator().manual_seed(1)
    return Tiny().eval(), (torch.rand(1, 3, 8, 8, generator=generator) * 2 - 1,)


@functools.cache
def _record(bug: Any) -> tuple[list[PassState], ArmLowering, tuple[torch.Tensor, ...]]:
    """The tiny model lowered with `bug` (a pass class) inserted, its states recorded (once per bug)."""
    model, inputs = _tiny()
    states: list[PassState] = []
    with contextlib.ExitStack() as stack:
        stack.enter_context(passes_inserted_after(bug.AFTER, [bug()]))
        stack.enter_context(record_pass_states(states))
        lowering = lower_to_arm(model, inputs, "TOSA-1.0+INT")
    return states, lowering, inputs


def _bisect(bug: Any) -> PassBisection:
    return bisect_recorded(*_record(bug))


@pytest.mark.parametrize("target", ["TOSA-1.0+INT", "TOSA-1.0+INT+int16"])
def test_clean_pipeline_names_no_pass_and_both_ends_are_exact(target: str) -> None:
    model, inputs = _tiny()
    result = bisect_passes(model, inputs, target)
    assert result.culprit is None and result.culprit_index is None, result.line()
    # Every graph was reached (those of passes that changed nothing are not run again), and the
    # interpreter reproduced both ends bit for bit.
    assert result.reached == result.passes + 1 == len(result.pipeline) + 1
    assert 1 < result.evaluated < result.reached
    assert result.start_quanta == 0.0 and result.end_quanta == 0.0, result.notes
    assert result.trusted and not result.notes
    assert {"FoldAndAnnotateQParamsPass", "RewriteConvPass", "ExirToTosaPass", "InsertRescalePass"} <= set(result.pipeline)


@pytest.mark.parametrize("bug", [ScaleOneOutputQParamPass, NegateOneWeightPass], ids=lambda b: b.__name__)
def test_a_pass_bug_is_named_exactly(bug: Any) -> None:
    result = _bisect(bug)
    assert result.culprit == bug.__name__, result.line()
    assert result.culprit_index is not None
    assert result.pipeline[result.culprit_index - 1] == bug.__name__
    assert result.pipeline[result.culprit_index - 2] == bug.AFTER.__name__
    assert result.max_quanta_before is not None and result.max_quanta_before <= result.threshold_quanta
    assert result.max_quanta_after is not None and result.max_quanta_after > result.threshold_quanta
    # The buggy TOSA graph is what the interpreter computes too, and the bug's change lasts to
    # the last graph: the answer is trusted.
    assert result.final_quanta is not None and result.final_quanta > result.threshold_quanta
    assert result.trusted, result.notes
    assert f"{bug.__name__} (#{result.culprit_index})" in result.line()
    assert result.to_json()["culprit"] == bug.__name__


def test_the_threshold_decides_what_is_beyond_rounding() -> None:
    states, lowering, inputs = _record(ScaleOneOutputQParamPass)
    strict = bisect_recorded(states, lowering, inputs, threshold_quanta=1.0)
    assert strict.culprit == "ScaleOneOutputQParamPass" and strict.max_quanta_after is not None
    lenient = bisect_recorded(states, lowering, inputs, threshold_quanta=strict.max_quanta_after)
    assert lenient.culprit != strict.culprit and lenient.threshold_quanta == strict.max_quanta_after


def test_recording_the_pass_states_changes_no_byte() -> None:
    model, inputs = _tiny()
    plain = lower_to_arm(model, inputs, "TOSA-1.0+INT")
    states: list[PassState] = []
    with record_pass_states(states):
        recorded = lower_to_arm(model, inputs, "TOSA-1.0+INT")
    assert recorded.pte == plain.pte and recorded.tosa_flatbuffers == plain.tosa_flatbuffers
    assert [s.name for s in states[1:]] == [row.name for row in recorded.reports[0].rows]
    assert states[0].name == "" and all(s.same_as is None or s.same_as < s.index for s in states)


def test_inserted_passes_are_scoped_to_the_block() -> None:
    spec = compile_spec_for("TOSA-1.0+INT")
    with passes_inserted_after(ScaleOneOutputQParamPass.AFTER, [ScaleOneOutputQParamPass()]):
        inside = FastArmPassManager(spec)._pass_insertions
    assert ScaleOneOutputQParamPass.AFTER in inside
    assert not FastArmPassManager(spec)._pass_insertions


@pytest.mark.parametrize(
    ("shape", "dtype", "low", "high", "scales", "in_zp", "out_zp"),
    [
        ((1, 4, 4, 3), torch.int32, -(2**20), 2**20, [0.0012, 0.0007, 0.0031], 0, -5),
        ((1, 4, 4, 3), torch.int8, -128, 127, [524288.0], -3, 0),
        ((2, 5), torch.int32, -(2**24), 2**24, [1.9e-06], 0, 17),
        ((2, 5), torch.int8, -128, 127, [0.731], 4, -128),
    ],
)
def test_rescale_in_torch_equals_the_reference_model_kernel(
    shape: tuple[int, ...], dtype: torch.dtype, low: int, high: int, scales: list[float], in_zp: int, out_zp: int
) -> None:
    x = torch.randint(low, high, shape, generator=torch.Generator().manual_seed(0), dtype=dtype)
    out = torch.int32 if dtype == torch.int8 and scales[0] > 1 else torch.int8
    graph_module = torch.fx.GraphModule(torch.nn.Module(), torch.fx.Graph())
    with _upstream.tosa_context(compile_spec_for("TOSA-1.0+INT"), graph_module):
        reference = exir_ops.backend.tosa.RESCALE.default(x, out, scales, in_zp, out_zp)
    mine = TOSA_IN_TORCH["RESCALE"](None, (x, out, scales, in_zp, out_zp), {})
    assert mine.dtype == reference.dtype and torch.equal(mine, reference)
