"""Which pass, for pass bugs: the first Arm pipeline pass after which the graph computes other outputs.

The lowering is run once with the graph recorded after every pass (``pass_states``); each
recorded graph is run on the example input by the qparam-aware interpreter
(``qparam_interpreter``), first to last, each once (a linear scan, stopping at the first
graph out of bounds; a pass that changed nothing the interpreter reads shares the previous
graph's outputs), and its outputs are compared, in output quanta, with the pipeline's input
graph (which is the fake-quantized program, q/dq nodes included). The first pass whose graph
is more than `threshold_quanta` away is named. Checks say whether the answer can be trusted:
the pipeline's input graph must compute the fake-quant program's outputs, the last graph the
TOSA reference model's outputs on the shipped flatbuffer, and a named pass's change must
last to the last graph.
"""

from __future__ import annotations

import math
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import torch

from lowerkit.arm_passes import _upstream
from lowerkit.arm_passes.devices import is_integer
from lowerkit.arm_passes.errors import ArmLoweringError
from lowerkit.arm_passes.lowering import ArmLowering, lower_to_arm
from lowerkit.arm_passes.numerics.pass_states import PassState, record_pass_states
from lowerkit.arm_passes.numerics.qparam_interpreter import run_graph
from lowerkit.arm_passes.reference import native_stdout_to_stderr, run_tosa_reference
from lowerkit.pass_infra.helpers.inputs import example_input_tuple

__all__ = ["PassBisection", "bisect_passes", "bisect_recorded", "quantized_feeds"]

#: How the recorded graphs are searched (reported in the result).
METHOD = (
    "linear scan: each pass's graph run once (unless the pass changed nothing the interpreter reads), "
    "first to last, stopping at the first out of bounds"
)


@dataclass(frozen=True)
class PassBisection:
    """Where in the Arm pass pipeline the graph's outputs leave the fake-quant program's."""

    #: The first pass after which the outputs are more than `threshold_quanta` off (its class
    #: name, e.g. "InsertRescalePass"), and its position in the pipeline (1: the first pass);
    #: None if no pass is.
    culprit: str | None
    culprit_index: int | None
    #: Max |output - the pipeline input's output| in output quanta, before and after `culprit`.
    max_quanta_before: float | None
    max_quanta_after: float | None
    threshold_quanta: float
    #: Graphs the scan reached (the pipeline's input and one per pass, up to the culprit), graphs
    #: it ran (a pass that changed nothing the interpreter reads is not run again), and passes
    #: the pipeline ran. `seconds`: the scan (the lowering itself not counted).
    reached: int
    evaluated: int
    passes: int
    method: str
    #: The pipeline input graph vs the fake-quant program (quanta): the interpreter's start check.
    start_quanta: float | None
    #: The pipeline's last graph vs the TOSA reference model on the shipped flatbuffer (quanta).
    end_quanta: float | None
    #: The last pass's graph vs the pipeline's input (quanta): a pass bug's change lasts to the end.
    final_quanta: float | None
    seconds: float
    notes: tuple[str, ...] = ()
    #: The pipeline's passes in order (pass k, 1-based as `culprit_index`, is ``pipeline[k - 1]``).
    pipeline: tuple[str, ...] = field(default=(), repr=False)

    @property
    def culprit_label(self) -> str | None:
        """The culprit and its position, e.g. "InsertRescalePass (#146)"."""
        return f"{self.culprit} (#{self.culprit_index})" if self.culprit is not None else None

    @property
    def trusted(self) -> bool:
        """The end checks passed: the interpreter reproduces the fake-quant program and the TOSA
        graph, and a named pass's change lasts to the last graph (one that goes away again is
        more likely the interpreter misreading the graphs in between than a pass bug)."""
        return (
            self.start_quanta is not None
            and self.start_quanta <= self.threshold_quanta
            and self.end_quanta is not None
            and self.end_quanta <= self.threshold_quanta
            and (self.culprit is None or (self.final_quanta is not None and self.final_quanta > self.threshold_quanta))
        )

    def line(self) -> str:
        """One line for a terminal."""
        if self.culprit is not None:
            text = (
                f"first pass after which the outputs differ: {self.culprit_label} "
                f"({_text(self.max_quanta_before)} -> {_text(self.max_quanta_after)} quanta, "
                f"threshold {self.threshold_quanta:g})"
            )
        elif self.end_quanta is not None and self.end_quanta > self.threshold_quanta and self.reached == self.passes + 1:
            text = (
                f"no pass changes the outputs; the TOSA serialization (node visitors) does: "
                f"{self.end_quanta:g} quanta between the last pass's graph and the reference model"
            )
        elif self.reached < self.passes + 1:
            text = f"none of the first {self.reached - 1} passes changes the outputs beyond {self.threshold_quanta:g} quanta"
        else:
            text = f"no pass changes the outputs beyond {self.threshold_quanta:g} quanta"
        checks = "" if self.trusted else " [not trusted: " + "; ".join(self.notes) + "]"
        scanned = f"{self.reached} of {self.passes + 1} graphs, {self.evaluated} run, in {self.seconds:.1f} s"
        return f"pass bisection ({scanned}): {text}{checks}"

    def advice(self) -> str | None:
        """A sentence for the report's advice, when a pass is named."""
        if self.culprit is None:
            return None
        return (
            f"the lowered graph departs from the fake-quant program in the Arm pass pipeline, first after "
            f"{self.culprit_label} ({_text(self.max_quanta_after)} output quanta): read that pass (a bug, or "
            "integer arithmetic that rounds differently from float), not the quantization"
            + ("" if self.trusted else " (unconfirmed: the bisection's end checks failed, see its notes)")
        )

    def to_json(self) -> dict[str, Any]:
        """The `bisection` field of `lowerkit debug --json` (non-finite quanta as strings)."""
        return {
            "culprit": self.culprit,
            "culprit_index": self.culprit_index,
            "max_quanta_before": _json(self.max_quanta_before),
            "max_quanta_after": _json(self.max_quanta_after),
            "threshold_quanta": self.threshold_quanta,
            "reached": self.reached,
            "evaluated": self.evaluated,
            "passes": self.passes,
            "method": self.method,
            "start_quanta": _json(self.start_quanta),
            "end_quanta": _json(self.end_quanta),
            "final_quanta": _json(self.final_quanta),
            "trusted": self.trusted,
            "seconds": round(self.seconds, 2),
            "notes": list(self.notes),
        }


def _text(value: float | None) -> str:
    return "-" if value is None else f"{value:g}"


def _json(value: float | None) -> float | str | None:
    return value if value is None or math.isfinite(value) else str(value)


def quantized_feeds(lowering: ArmLowering, inputs: Sequence[torch.Tensor]) -> list[torch.Tensor]:
    """The example inputs as the delegate takes them: quantized with its input qparams."""
    wide = bool(getattr(lowering, "a16w8", False))  # a16w8: int16 activations
    low, high, dtype = (-32768, 32767, torch.int16) if wide else (-128, 127, torch.int8)
    return [
        torch.clamp(torch.round(x / scale) + zp, low, high).to(dtype)
        for x, (scale, zp) in zip(inputs, lowering.input_qparams, strict=True)
    ]


def _quanta(a: Sequence[torch.Tensor], b: Sequence[torch.Tensor]) -> float:
    """Max |a - b| over the (integer) outputs, in their quanta; inf when they do not line up."""
    if len(a) != len(b) or any(x.shape != y.shape for x, y in zip(a, b, strict=True)):
        return float("inf")
    return max((float((x.double() - y.double()).abs().max()) for x, y in zip(a, b, strict=True) if x.numel()), default=0.0)


def _fake_quant_outputs(lowering: ArmLowering, inputs: tuple[Any, ...]) -> list[torch.Tensor]:
    """The fake-quant program's outputs quantized with the delegate's output qparams (exact ints)."""
    assert lowering.source_program is not None
    with torch.no_grad():
        raw = lowering.source_program.module()(*inputs)
    outputs = [raw] if isinstance(raw, torch.Tensor) else list(raw)
    low, high, dtype = (-32768, 32767, torch.int16) if lowering.a16w8 else (-128, 127, torch.int8)
    return [
        torch.clamp(torch.round(y / scale) + zp, low, high).to(dtype)
        for y, (scale, zp) in zip(outputs, lowering.output_qparams, strict=True)
    ]


def bisect_passes(
    model: Any,
    example_inputs: tuple[Any, ...],
    target: str = "TOSA-1.0+INT",
    *,
    calibration: Sequence[Sequence[Any]] | None = None,
    keep_float: Sequence[str] = (),
    threshold_quanta: float = 1.0,
) -> PassBisection:
    """Lower `model` recording the graph after every Arm pass and name the first pass after
    which its outputs on the example inputs are more than `threshold_quanta` output quanta away
    from the pipeline's input (the fake-quant program). INT targets, one fully delegated partition;
    `ArmLoweringError` (saying why) when the lowering does not allow it.
    """
    inputs = example_input_tuple(example_inputs, ArmLoweringError)
    if not is_integer(target):
        raise ArmLoweringError(f"pass bisection compares integer outputs in quanta; {target!r} is a float target")
    states: list[PassState] = []
    with record_pass_states(states):
        lowering = lower_to_arm(model, inputs, target, calibration=calibration, keep_float=keep_float)
    return bisect_recorded(states, lowering, inputs, threshold_quanta=threshold_quanta)


def bisect_recorded(
    states: list[PassState], lowering: ArmLowering, example_inputs: tuple[Any, ...], *, threshold_quanta: float = 1.0
) -> PassBisection:
    """`bisect_passes` on a lowering already run inside ``record_pass_states(states)``."""
    inputs = example_input_tuple(example_inputs, ArmLoweringError)
    if len(lowering.tosa_flatbuffers) != 1 or lowering.cpu_ops or len(lowering.input_qparams) != len(inputs):
        raise ArmLoweringError(
            "pass bisection needs one fully delegated partition with quantized inputs; this lowering has "
            f"{len(lowering.tosa_flatbuffers)} partition(s), CPU ops {list(lowering.cpu_ops)}"
        )
    if not states or states[0].name != "" or any(s.name == "" for s in states[1:]):
        raise ArmLoweringError(
            "pass bisection needs the graphs of one run of lowerkit's fast pipeline (none or several were "
            "recorded): on unproven library versions set LOWERKIT_ALLOW_UNPROVEN=1"
        )
    return _scan(states, lowering, inputs, quantized_feeds(lowering, inputs), threshold_quanta, time.perf_counter())


def _first_line(error: Exception) -> str:
    text = str(error).strip().splitlines()
    return f"{type(error).__name__}: {text[0] if text else ''}"[:400]


def _outputs(states: list[PassState], index: int, feeds: list[torch.Tensor]) -> list[torch.Tensor]:
    state = states[index]
    passes_run = {s.name for s in states[1 : index + 1]}
    return run_graph(state.graph, state.root, state.constants, state.user_inputs, feeds, passes_run)


def _scan(
    states: list[PassState],
    lowering: ArmLowering,
    inputs: tuple[Any, ...],
    feeds: list[torch.Tensor],
    threshold: float,
    start: float,
) -> PassBisection:
    """Evaluate the states first to last, each once, until one is more than `threshold` off the first."""
    notes: list[str] = []
    shipped = [
        torch.from_numpy(np.asarray(a))
        for a in run_tosa_reference(lowering.tosa_flatbuffers[0], [f.numpy() for f in feeds])
    ]
    culprit: PassState | None = None
    before = after = end_quanta = final_quanta = None
    last: list[torch.Tensor] | None = None
    with _upstream.tosa_context(lowering.compile_spec, states[-1].root), native_stdout_to_stderr():
        try:
            reference = _outputs(states, 0, feeds)
        except Exception as error:  # nothing to compare with: the bisection cannot run
            raise ArmLoweringError(f"the interpreter cannot run the pipeline's input graph: {_first_line(error)}") from error
        evaluated = 1
        try:
            start_quanta: float | None = _quanta(reference, _fake_quant_outputs(lowering, inputs))
        except ValueError as error:  # outputs that do not pair with the delegate's output qparams
            start_quanta = None
            notes.append(f"the fake-quant program's outputs could not be compared: {_first_line(error)}")
        deviation = 0.0
        outputs = reference
        reached = 1
        for index, state in enumerate(states[1:], start=1):
            if state.same_as is not None:  # the pass changed nothing the interpreter reads
                reached += 1
                last = outputs if state is states[-1] else None
                continue
            try:
                outputs = _outputs(states, index, feeds)
            except Exception as error:  # any op the interpreter cannot run ends the scan, with its reason
                notes.append(f"stopped at {state.label}: {_first_line(error)}")
                break
            evaluated += 1
            reached += 1
            current = _quanta(outputs, reference)
            if current > threshold:
                culprit, before, after = state, deviation, current
                break
            deviation = current
            last = outputs if state is states[-1] else None
        if last is None and culprit is not None:
            try:
                last = _outputs(states, len(states) - 1, feeds)
            except Exception as error:  # no end check then
                notes.append(f"the last pass's graph could not be run, so it was not checked: {_first_line(error)}")
                last = None
    if last is not None:
        end_quanta = _quanta(last, shipped)
        final_quanta = _quanta(last, reference)
    if start_quanta is not None and start_quanta > threshold:
        notes.append(
            f"the pipeline's input graph is {start_quanta:g} quanta from the fake-quant program: "
            "the interpreter does not reproduce it"
        )
    if culprit is not None and final_quanta is not None and final_quanta <= threshold:
        notes.append(
            f"the outputs come back within {threshold:g} quanta of the pipeline's input by the last pass "
            f"({final_quanta:g}): more likely the interpreter misreads the graphs after {culprit.label} than a pass bug"
        )
    if end_quanta is not None and end_quanta > threshold:
        notes.append(
            f"the last pass's graph is {end_quanta:g} quanta from the TOSA reference model on the shipped "
            "flatbuffer: the serialization (node visitors) or the interpreter differs"
        )
    return PassBisection(
        culprit=culprit.name if culprit is not None else None,
        culprit_index=culprit.index if culprit is not None else None,
        max_quanta_before=before,
        max_quanta_after=after,
        threshold_quanta=threshold,
        reached=reached,
        evaluated=evaluated,
        passes=len(states) - 1,
        method=METHOD,
        start_quanta=start_quanta,
        end_quanta=end_quanta,
        final_quanta=final_quanta,
        seconds=time.perf_counter() - start,
        notes=tuple(notes),
        pipeline=tuple(s.name for s in states[1:]),
    )
