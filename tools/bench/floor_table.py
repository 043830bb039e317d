"""bench.report's stage-floor table: each stage's time as a multiple of its floor (`bench.floors`).

One row per case whose records hold floors (runs before the floor column hold none: no row, and no
table when no case has them); the stage with the largest excess (time minus floor, in seconds) is
named per row.
"""

from __future__ import annotations

import math
from typing import Any

from bench.floors import FLOOR_DEFINITIONS, FLOOR_STAGES

__all__ = ["biggest_excess", "floor_line", "floor_section", "seconds", "whole"]

def seconds(value: float) -> str:
    """Seconds with the precision their size needs (a floor can be microseconds)."""
    if value >= 0.1:
        return f"{value:.2f}"
    if value >= 0.001:
        return f"{value:.3f}"
    return f"{value * 1e6:.0f} µs"


def _multiple(time: float, floor: float) -> str:
    if floor <= 0:
        return "-"
    ratio = time / floor
    return f"{ratio:.0f}x" if ratio >= 100 else f"{ratio:.1f}x"


def _cell(stages: dict[str, float], floors: dict[str, float | None], stage: str) -> str:
    if stage not in stages:
        return "-"
    floor = floors.get(stage)
    if floor is None:
        return f"{seconds(stages[stage])} / -"
    return f"{seconds(stages[stage])} / {seconds(floor)} = {_multiple(stages[stage], floor)}"


def biggest_excess(stages: dict[str, float], floors: dict[str, float | None]) -> tuple[str, float] | None:
    """The stage whose time exceeds its floor by the most seconds, and by how much; None without floors."""
    excess = {s: stages[s] - f for s, f in floors.items() if f is not None and s in stages}
    if not excess:
        return None
    stage = max(excess, key=lambda s: excess[s])
    return stage, excess[stage]


def whole(stages: dict[str, float], floors: dict[str, float | None]) -> tuple[float, float] | None:
    """(summed stage seconds, summed floors), when every stage has a floor."""
    if not stages or any(floors.get(s) is None for s in stages):
        return None
    return sum(stages.values()), sum(f for f in floors.values() if f is not None)


def floor_line(side: dict[str, Any]) -> str | None:
    """One side's floors in a line (the benchmark's console output); None without floors."""
    if not side.get("floors"):
        return None
    times, floors = side["stages"], side["floors"]
    summed, worst = whole(times, floors), biggest_excess(times, floors)
    text = f"{seconds(summed[0])} s / floors {seconds(summed[1])} s = {_multiple(*summed)}" if summed else "floors"
    return text + (f", biggest excess {worst[0]} +{seconds(worst[1])} s" if worst else "")


def floor_section(cases: list[dict[str, Any]], labels: dict[str, str]) -> list[str]:
    """The table's lines (none when no case holds floors); `labels` names the sides."""
    rows = [(c, side, v) for c in cases for side, v in c["sides"].items() if v.get("floors")]
    errors = [(c, s, v["floor_error"]) for c in cases for s, v in c["sides"].items() if v.get("floor_error")]
    failed = [f"- `{c['model']}` {c['target']}, {labels.get(s, s)}: floors failed: `{e}`" for c, s, e in errors]
    if not rows:
        return ["", "Stage floors:", "", *failed] if failed else []
    stages = [s for s in FLOOR_STAGES if any(s in v["stages"] for _, _, v in rows)]
    header = ["model", "target", "side", *(f"{s} s / floor" for s in stages), "whole / Σ floors",
              "biggest excess", "passes changed"]  # fmt: skip
    lines = [
        "", "Stage floors: each stage's seconds beside an estimate of the work it cannot skip, measured in the "
        "same worker process around and after the timed flow (the run the stage seconds come from):", "",
        "| " + " | ".join(header) + " |",
        "|" + "|".join("---" if i < 3 else "---:" for i in range(len(header))) + "|",
    ]  # fmt: skip
    wholes = []
    for case, side, value in rows:
        times, floors = value["stages"], value["floors"]
        summed = whole(times, floors)
        if summed:
            wholes.append(summed[0] / summed[1])
        worst = biggest_excess(times, floors)
        row = [f"`{case['model']}`", case["target"], labels.get(side, side)]
        row += [_cell(times, floors, s) for s in stages]
        row.append(f"{seconds(summed[0])} / {seconds(summed[1])} = {_multiple(*summed)}" if summed else "-")
        row.append(f"{worst[0]} (+{seconds(worst[1])} s)" if worst else "-")
        row.append(str(value.get("floor_parts", {}).get("changed_passes", "-")))
        lines.append("| " + " | ".join(row) + " |")
    lines.append("")
    if wholes:
        geomean = math.exp(sum(math.log(w) for w in wholes) / len(wholes))
        lines.append(f"Whole time / summed floors: geomean {geomean:.1f}x over {len(wholes)} cases "
                     f"(max {max(wholes):.1f}x).")  # fmt: skip
    lines.append("Floors (`bench.floors`; a no-op walk reads each node's op, target, args, kwargs, users and "
                 "`meta['val']`, its per-node cost measured on the floor's export):")  # fmt: skip
    lines += [f"- {stage}: {FLOOR_DEFINITIONS[stage]}." for stage in stages]
    return lines + failed
