"""The `lowerkit debug -o report.html` page: one self-contained file (inline CSS and SVG, no scripts, no network)."""

from __future__ import annotations

import html
import math
from typing import Any

_STYLE = """
body{font:14px system-ui,sans-serif;margin:2em;color:#222}
table{border-collapse:collapse;margin:1em 0}
td,th{border:1px solid #ccc;padding:3px 8px;text-align:right}
td:first-child,th:first-child,td.l{text-align:left}
tr.flag td{background:#fde8e8}
code,pre{background:#f4f4f4;padding:2px 4px}
svg text{font:11px sans-serif}
"""


def _n(value: float | None, digits: int = 1) -> str:
    if value is None:
        return "-"
    return f"{value:.{digits}f}" if math.isfinite(value) else html.escape(str(value))


def chart(report: Any, width: int = 900, height: int = 260) -> str:
    """An inline SVG: each layer's SQNR (dB) against float along the network, flagged layers in red."""
    layers = sorted(report.layers, key=lambda x: x.index)
    if not layers:
        return "<p>No layers.</p>"
    values = [min(x.error.sqnr_db, 60.0) for x in layers]
    top, bottom = max(60.0, *values), min(0.0, *values)
    left, right, pad = 50, 10, 20
    step = (width - left - right) / max(len(layers) - 1, 1)

    def y(value: float) -> float:
        return pad + (top - value) / (top - bottom) * (height - 2 * pad)

    points = " ".join(f"{left + i * step:.1f},{y(v):.1f}" for i, v in enumerate(values))
    parts = [f'<svg width="{width}" height="{height + 110}" role="img">']
    for tick in range(int(bottom) // 10 * 10, int(top) + 1, 10):
        parts.append(f'<line x1="{left}" x2="{width - right}" y1="{y(tick):.1f}" y2="{y(tick):.1f}" stroke="#eee"/>')
        parts.append(f'<text x="{left - 6}" y="{y(tick) + 4:.1f}" text-anchor="end">{tick}</text>')
    if report.threshold_kind == "db":
        parts.append(
            f'<line x1="{left}" x2="{width - right}" y1="{y(report.threshold):.1f}" y2="{y(report.threshold):.1f}" '
            'stroke="#e99" stroke-dasharray="4"/>'
        )
    parts.append(f'<polyline fill="none" stroke="#36c" stroke-width="2" points="{points}"/>')
    for i, (layer, value) in enumerate(zip(layers, values, strict=True)):
        flagged = layer.range is not None and layer.range.flagged
        colour = "#d22" if flagged else "#36c"
        name = html.escape(layer.name)
        parts.append(
            f'<circle cx="{left + i * step:.1f}" cy="{y(value):.1f}" r="{5 if flagged else 3}" fill="{colour}">'
            f"<title>{name} ({html.escape(layer.op)}): {_n(layer.error.sqnr_db)} dB</title></circle>"
        )
        parts.append(
            f'<text x="{left + i * step:.1f}" y="{height + 5}" transform="rotate(45 {left + i * step:.1f} {height + 5})">'
            f"{name if len(layers) <= 40 or i % max(1, len(layers) // 40) == 0 else ''}</text>"
        )
    parts.append('<text x="4" y="12">SQNR dB</text></svg>')
    return "".join(parts)


def bisection_section(report: Any) -> str:
    """The pass bisection's section, or "" when none was run."""
    bisection = getattr(report, "bisection", None)
    if bisection is None:
        return ""
    data = bisection.to_json()
    rows = "".join(
        f'<tr><td>{html.escape(key)}</td><td class="l">{html.escape(str(data[key]))}</td></tr>'
        for key in ("culprit", "culprit_index", "max_quanta_before", "max_quanta_after", "threshold_quanta",
                    "start_quanta", "end_quanta", "final_quanta", "trusted", "reached", "evaluated", "passes", "method", "seconds")
    )
    notes = "".join(f"<li>{html.escape(n)}</li>" for n in data["notes"])
    return (
        f"<h2>Pass bisection</h2><p><b>{html.escape(bisection.line())}</b></p>"
        f"<table>{rows}</table>" + (f"<ul>{notes}</ul>" if notes else "")
    )


def _range_cell(report: Any, layer: Any) -> str:
    """The range verdict of a flagged layer, or where a data-movement layer's error comes from."""
    if layer.range is not None and layer.range.flagged:
        return str(layer.range.describe())
    producer = report.producer(layer)
    return f"error from {producer.name}'s quantization (this op only moves data)" if producer is not None else ""


def search_section(report: Any) -> str:
    """The keep-float search's section: its answer and every trial lowering, or "" when none was run."""
    advice = getattr(report, "keep_float_advice", None)
    if advice is None:
        return ""
    rows = "".join(
        f'<tr><td class="l">{html.escape(", ".join(t.names))}</td><td>{_n(t.output_sqnr_db)}</td>'
        f"<td>{t.output_sqnr_db - advice.baseline_db:+.1f}</td></tr>"
        for t in advice.trials
    )
    return (
        f"<h2>Keep-float search (target {advice.target_db:g} dB)</h2><p><b>{html.escape(advice.line())}</b></p>"
        f"<table><tr><th>kept in float</th><th>output SQNR dB</th><th>gain dB</th></tr>{rows}</table>"
    )


def render(report: Any) -> str:
    """The whole page."""
    data = report.to_json()
    first = data["first_over_threshold"]
    rows = []
    for row, layer in zip(data["layers"], report.worst_first(), strict=True):
        flagged = layer.range is not None and layer.range.flagged
        stages = "; ".join(f"{label}: {_n(e.sqnr_db)} dB" for label, e in layer.stages.items())
        rows.append(
            f'<tr class="{"flag" if flagged else ""}"><td>{html.escape(layer.name)}</td>'
            f'<td class="l">{html.escape(layer.op)}</td><td>{layer.index}</td><td>{_n(layer.error.sqnr_db)}</td>'
            f"<td>{layer.error.max_abs_error:.3g}</td><td>{_n(layer.error.max_error_quanta)}</td>"
            f"<td>{layer.error.cosine:.4f}</td><td>{_n(row['added_db'])}</td><td>{_n(layer.weight_sqnr_db)}</td>"
            f'<td class="l">{html.escape(_range_cell(report, layer))}</td>'
            f'<td class="l">{html.escape(stages)}</td></tr>'
        )
    sensitivity = "".join(
        f"<tr><td>{html.escape(s.name)}</td><td>{_n(s.output_sqnr_db)}</td><td>{s.gain_db:+.1f}</td></tr>"
        for s in report.sensitivity
    )
    commands = "".join(f"<pre>{html.escape(c)}</pre>" for c in data["summary"].get("commands", []))
    title = html.escape(f"lowerkit debug: {report.model} on {report.target}")
    return f"""<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8"><title>{title}</title><style>{_STYLE}</style></head><body>
<h1>{title}</h1>
<p>{html.escape(report.compared)}. Output SQNR against float: <b>{_n(report.output_sqnr_db)} dB</b>.
Threshold: {report.threshold:g} {"output quanta" if report.threshold_kind == "quanta" else "dB"};
first layer over it: <b>{html.escape(first or "none")}</b>.</p>
<h2>Advice</h2><ul>{"".join(f"<li>{html.escape(a)}</li>" for a in data["advice"]) or "<li>nothing stands out</li>"}</ul>
<h2>Error along the network</h2>{chart(report)}
<h2>Layers, worst first</h2>
<table><tr><th>layer</th><th>op</th><th>#</th><th>SQNR dB</th><th>max abs error</th><th>max error (quanta)</th>
<th>cosine</th><th>added dB</th><th>weight SQNR dB</th><th>range</th><th>stages</th></tr>{"".join(rows)}</table>
{bisection_section(report)}
{search_section(report)}
<h2>Sensitivity: one layer kept in float</h2>
<table><tr><th>layer</th><th>output SQNR dB</th><th>gain dB</th></tr>{sensitivity}</table>
<h2>Reproduce</h2>{commands}
<h2>Notes</h2><ul>{"".join(f"<li>{html.escape(n)}</li>" for n in report.notes)}</ul>
</body></html>
"""
