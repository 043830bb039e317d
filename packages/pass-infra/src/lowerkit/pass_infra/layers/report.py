"""A per-layer numerics report: the layers, where the error starts, which layers add it, what fixes it."""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any, Protocol

from lowerkit.pass_infra.layers.metrics import TensorError
from lowerkit.pass_infra.layers.ranges import RangeDiagnostic

__all__ = ["CLEAN_DB", "Bisection", "DebugReport", "LayerNumerics", "Sensitivity"]

#: The SQNR a layer with no quantized input starts from (and the cap of every SQNR compared):
#: int8 rounding alone stays below it.
CLEAN_DB = 60.0


@dataclass(frozen=True)
class LayerNumerics:
    """One layer's output compared along the lowering (float, quantized torch program, device)."""

    name: str
    op: str
    #: Position along the network (graph order).
    index: int
    #: The headline comparison: what the target computes (or the closest runnable stand-in) vs float.
    error: TensorError
    #: Every comparison made, by label (e.g. "quantized vs float", "TOSA vs quantized").
    stages: dict[str, TensorError] = field(default_factory=dict)
    #: The quantization scale of the layer's output (quantized layers).
    scale: float | None = None
    #: The layers feeding this one.
    inputs: tuple[str, ...] = ()
    #: Range diagnostic of the quantized output, where it is one.
    range: RangeDiagnostic | None = None
    #: SQNR of the layer's decoded weight against the float weight (Core ML).
    weight_sqnr_db: float | None = None
    #: Whether `--keep-float NAME` can name this layer (it is a module of the model).
    keepable: bool = False

    def to_json(self) -> dict[str, Any]:
        """The layer as JSON: name, op, sqnr_db, max_error_quanta, cosine, and the rest."""
        row: dict[str, Any] = {"name": self.name, "op": self.op, "index": self.index, **self.error.to_json()}
        row["stages"] = {label: e.to_json() for label, e in self.stages.items()}
        row["scale"] = self.scale
        row["inputs"] = list(self.inputs)
        row["added_db"] = None
        if self.range is not None:
            row["range"] = {
                "channel": self.range.channel,
                "dominance": _finite(self.range.dominance),
                "starved_share": self.range.starved_share,
                "flagged": self.range.flagged,
            }
        if self.weight_sqnr_db is not None:
            row["weight_sqnr_db"] = _finite(self.weight_sqnr_db)
        row["keepable"] = self.keepable
        return row


def _finite(value: float) -> float | str:
    return value if math.isfinite(value) else str(value)


@dataclass(frozen=True)
class Sensitivity:
    """The output with one layer kept in float, against the fully quantized output."""

    name: str
    output_sqnr_db: float
    gain_db: float


class Bisection(Protocol):
    """Which lowering pass first changes the outputs (e.g. lowerkit.arm_passes' PassBisection)."""

    @property
    def culprit(self) -> str | None:
        """The first pass that changes the outputs, or None."""
        ...

    def line(self) -> str:
        """One line for a terminal."""
        ...

    def advice(self) -> str | None:
        """A sentence for the advice, when a pass is named."""
        ...

    def to_json(self) -> dict[str, Any]:
        """The `bisection` field of the JSON report."""
        ...


@dataclass
class DebugReport:
    """Everything `lowerkit debug` shows: layers, analysis, sensitivity scan, notes."""

    model: str
    target: str
    #: What was compared, in words.
    compared: str
    layers: list[LayerNumerics]
    #: The output's SQNR against float (quantized program, or device where it ran).
    output_sqnr_db: float
    #: "quanta" (error in output quanta over `threshold`) or "db" (SQNR under `threshold`).
    threshold_kind: str = "quanta"
    threshold: float = 1.0
    #: The comparison (a `stages` label) the threshold applies to; None: the headline `error`.
    threshold_stage: str | None = None
    sensitivity: list[Sensitivity] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    #: Extra output-level figures (e.g. the device's output against the quantized program).
    summary: dict[str, Any] = field(default_factory=dict)
    #: Which lowering pass first changes the outputs, where one was searched for (else None).
    bisection: Bisection | None = None

    def added_db(self, layer: LayerNumerics) -> float:
        """How much SQNR the layer loses against the worst of its inputs (0 for none)."""
        by_name = {x.name: x for x in self.layers}
        inherited = [by_name[n].error.sqnr_db for n in layer.inputs if n in by_name]
        start = min([CLEAN_DB, *inherited])
        return max(0.0, start - min(layer.error.sqnr_db, CLEAN_DB))

    def thresholded(self, layer: LayerNumerics) -> TensorError:
        """The comparison of `layer` the threshold applies to."""
        return layer.stages.get(self.threshold_stage, layer.error) if self.threshold_stage else layer.error

    def over_threshold(self, layer: LayerNumerics) -> bool:
        """Whether the layer's error crosses the report's threshold (False where it lacks that comparison)."""
        if self.threshold_stage and self.threshold_stage not in layer.stages:
            return False
        error = self.thresholded(layer)
        if self.threshold_kind == "quanta" and error.max_error_quanta is not None:
            return error.max_error_quanta > self.threshold
        return error.sqnr_db < self.threshold

    @property
    def first_over_threshold(self) -> LayerNumerics | None:
        """The first layer along the network whose error crosses the threshold."""
        return next((x for x in self.layers if self.over_threshold(x)), None)

    def worst_first(self) -> list[LayerNumerics]:
        """The layers by the error they add, most first (ties: lower SQNR first)."""
        return sorted(self.layers, key=lambda x: (-round(self.added_db(x), 6), x.error.sqnr_db, x.index))

    @property
    def flagged(self) -> list[LayerNumerics]:
        """Layers whose quantized range one channel dominates, along the network."""
        return [x for x in self.layers if x.range is not None and x.range.flagged]

    def culprits(self, count: int = 5) -> list[str]:
        """Layers to look at first: range-flagged ones, then those adding the most error."""
        names: list[str] = [x.name for x in self.flagged]
        names += [x.name for x in self.worst_first() if x.name not in names]
        return names[:count]

    def advice(self) -> list[str]:
        """Sentences for the user, the culprit first."""
        lines = []
        for layer in self.flagged:
            lines.append(f"{layer.name} ({layer.op}): {layer.range.describe() if layer.range else ''}")
        first = self.first_over_threshold
        if first is not None:
            unit = "output quanta" if self.threshold_kind == "quanta" else "dB"
            error = self.thresholded(first)
            value = error.max_error_quanta if self.threshold_kind == "quanta" else error.sqnr_db
            what = f"{self.threshold_stage} error" if self.threshold_stage else "error"
            lines.append(
                f"the {what} first crosses the threshold ({self.threshold:g} {unit}) at {first.name} "
                f"({value:.3g} {unit})"
            )
        found = self.bisection.advice() if self.bisection is not None else None
        if found:
            lines.append(found)
        gains = [s for s in self.sensitivity if s.gain_db > 0.5]
        if gains:
            best = max(gains, key=lambda s: s.gain_db)
            lines.append(
                f"keeping {best.name} in float gains {best.gain_db:.1f} dB at the output "
                f"(--keep-float {best.name})"
            )
        return lines

    def to_json(self) -> dict[str, Any]:
        """The report as JSON; `layers` worst first."""
        layers = []
        for layer in self.worst_first():
            row = layer.to_json()
            row["added_db"] = round(self.added_db(layer), 3)
            layers.append(row)
        first = self.first_over_threshold
        return {
            "model": self.model,
            "target": self.target,
            "compared": self.compared,
            "output_sqnr_db": _finite(self.output_sqnr_db),
            "threshold": {"kind": self.threshold_kind, "value": self.threshold, "stage": self.threshold_stage},
            "first_over_threshold": first.name if first is not None else None,
            "flagged_ranges": [x.name for x in self.flagged],
            "culprits": self.culprits(),
            "advice": self.advice(),
            "sensitivity": [
                {"name": s.name, "output_sqnr_db": _finite(s.output_sqnr_db), "gain_db": _finite(s.gain_db)}
                for s in self.sensitivity
            ],
            "summary": self.summary,
            "notes": self.notes,
            "layers": layers,
            "bisection": self.bisection.to_json() if self.bisection is not None else None,
        }
