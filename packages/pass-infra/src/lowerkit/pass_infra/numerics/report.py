"""A per-layer numerics report: the layers, where the error starts, which layers add it, what fixes it."""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any, Protocol

from lowerkit.pass_infra.numerics.keep_float import KeepFloatAdvice
from lowerkit.pass_infra.numerics.metrics import TensorError
from lowerkit.pass_infra.numerics.ranges import RangeDiagnostic
from lowerkit.pass_infra.numerics.values import moves_data

__all__ = ["CLEAN_DB", "MOVED_DB", "Bisection", "DebugReport", "LayerNumerics", "Sensitivity"]

#: The SQNR a layer with no quantized input starts from (and the cap of every SQNR compared):
#: int8 rounding alone stays below it.
CLEAN_DB = 60.0
#: A data-movement layer losing at least this much (one bit) shows its producer's quantization error.
MOVED_DB = 6.0


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
            row["range"] = self.range.to_json()
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
    #: The smallest keep-float set found that reaches the target output SQNR, where searched.
    keep_float_advice: KeepFloatAdvice | None = None

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

    def producer(self, layer: LayerNumerics) -> LayerNumerics | None:
        """For a data-movement layer (slice, view, permute, cat, pad...: it adds no error of its
        own), the layer whose quantization its values come from, looking through other
        data-movement layers (of several inputs, the coarsest-scaled one); None for other layers."""
        if not moves_data(layer.op):
            return None
        by_name = {x.name: x for x in self.layers}
        seen = {layer.name}
        current = layer
        while moves_data(current.op):
            inputs = [by_name[n] for n in current.inputs if n in by_name and n not in seen]
            if not inputs:
                return None
            current = max(inputs, key=lambda x: x.scale or 0.0)
            seen.add(current.name)
        return current

    def moved_error(self) -> LayerNumerics | None:
        """The data-movement layer showing the most error of its producer's making (at least
        MOVED_DB of it), or None."""
        moved = [x for x in self.layers if self.producer(x) is not None and self.added_db(x) >= MOVED_DB]
        return max(moved, key=self.added_db, default=None)

    def blamed(self, layer: LayerNumerics) -> LayerNumerics:
        """The layer whose quantization made `layer`'s error: its producer for a data-movement layer."""
        return self.producer(layer) or layer

    def culprits(self, count: int = 5) -> list[str]:
        """Layers to look at first: range-flagged ones, then those adding the most error (a
        data-movement layer's error charged to its producer, named just before it)."""
        names: list[str] = [x.name for x in self.flagged]
        for layer in self.worst_first():
            for name in (self.blamed(layer).name, layer.name):
                if name not in names:
                    names.append(name)
        return names[:count]

    def keep_float_candidates(self, count: int) -> list[tuple[str, ...]]:
        """What a keep-float search tries, culprits first: up to `count` modules alone, and after
        each producer the group of it and the data-movement layers sharing its scale."""
        by_name = {x.name: x for x in self.layers}
        singles: list[str] = []
        groups: list[tuple[str, ...]] = []
        for name in self.culprits(len(self.layers)):
            layer = by_name[name]
            module = name.split(":")[0]
            if layer.keepable and module not in singles:
                singles.append(module)
                group = self._sharing_group(self.blamed(layer))
                if len(group) > 1 and group not in groups:
                    groups.append(group)
            if len(singles) == count:
                break
        candidates: list[tuple[str, ...]] = [(m,) for m in singles]
        return candidates + groups

    def _sharing_group(self, producer: LayerNumerics) -> tuple[str, ...]:
        """`producer`'s module and those of the keepable data-movement layers fed by it with its scale."""
        names = [producer.name.split(":")[0]] if producer.keepable else []
        for layer in self.layers:
            same = layer.scale is not None and producer.scale is not None and math.isclose(layer.scale, producer.scale)
            if layer.keepable and same and self.producer(layer) is producer:
                module = layer.name.split(":")[0]
                names += [module] if module not in names else []
        return tuple(names)

    def advice(self) -> list[str]:
        """Sentences for the user, the culprit first."""
        lines = []
        for layer in self.flagged:
            lines.append(f"{layer.name} ({layer.op}): {layer.range.describe() if layer.range else ''}")
        moved = self.moved_error()
        source = self.producer(moved) if moved is not None else None
        if moved is not None and source is not None:
            lines.append(
                f"the error appears at {moved.name} ({moved.op}, {self.added_db(moved):.1f} dB lost), which only moves "
                f"data and adds no error of its own: its values are quantized as {source.name}'s output "
                f"({source.op}), so {source.name}'s quantization range is what loses it"
            )
        first = self.first_over_threshold
        if first is not None:
            unit = "output quanta" if self.threshold_kind == "quanta" else "dB"
            error = self.thresholded(first)
            value = error.max_error_quanta if self.threshold_kind == "quanta" else error.sqnr_db
            what = f"{self.threshold_stage} error" if self.threshold_stage else "error"
            origin = self.producer(first)
            lines.append(
                f"the {what} first crosses the threshold ({self.threshold:g} {unit}) at {first.name} "
                f"({value:.3g} {unit})" + (f", made by {origin.name}'s quantization" if origin is not None else "")
            )
        found = self.bisection.advice() if self.bisection is not None else None
        if found:
            lines.append(found)
        if self.keep_float_advice is not None:
            lines.append(self.keep_float_advice.line())
            if self.keep_float_advice.names:
                return lines
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
            producer = self.producer(layer)
            row["blame"] = producer.name if producer is not None else None
            layers.append(row)
        first = self.first_over_threshold
        moved = self.moved_error()
        return {
            "model": self.model,
            "target": self.target,
            "compared": self.compared,
            "output_sqnr_db": _finite(self.output_sqnr_db),
            "threshold": {"kind": self.threshold_kind, "value": self.threshold, "stage": self.threshold_stage},
            "first_over_threshold": first.name if first is not None else None,
            "flagged_ranges": [x.name for x in self.flagged],
            "culprits": self.culprits(),
            "error_moved_at": {"layer": moved.name, "producer": self.blamed(moved).name} if moved is not None else None,
            "advice": self.advice(),
            "sensitivity": [
                {"name": s.name, "output_sqnr_db": _finite(s.output_sqnr_db), "gain_db": _finite(s.gain_db)}
                for s in self.sensitivity
            ],
            "summary": self.summary,
            "notes": self.notes,
            "layers": layers,
            "bisection": self.bisection.to_json() if self.bisection is not None else None,
            "keep_float_advice": self.keep_float_advice.to_json() if self.keep_float_advice is not None else None,
        }
