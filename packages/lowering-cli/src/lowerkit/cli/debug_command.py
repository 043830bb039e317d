"""`lowerkit debug MODEL -t TARGET`: where a quantized lowering loses accuracy, layer by layer.

Imports only click and the standard library at start-up; the backend loads when the command runs.
"""

from __future__ import annotations

import json
import math
import shlex
from pathlib import Path
from typing import Any

import click

from lowerkit.cli import atomic, targets
from lowerkit.cli.backend import DebugRequest, Given
from lowerkit.cli.backend_flags import backend_flags
from lowerkit.cli.errors import CliError, UsageError
from lowerkit.cli.options import Target
from lowerkit.cli.sources.flags import as_arguments, source_options
from lowerkit.cli.sources.options import DEFAULT, SourceOptions


@click.command("debug")
@click.argument("model")
@click.option("-t", "--target", "target_name", required=True, help="An Arm target, or coreml-int8 / -w8 / -w4 / -palettize*.")
@click.option("--calibration", type=click.Path(path_type=Path), help="A .pt file or folder of saved input tensors.")
@click.option("-o", "--output", type=click.Path(path_type=Path), help="Write a self-contained HTML report here.")
@click.option("--json", "as_json", is_flag=True, help="Print the report as JSON (layers worst first).")
@click.option("--keep-float", "keep_float", multiple=True, metavar="LAYER", help="Leave this module in float (repeatable).")
@click.option("--threshold", type=float, help="Where the error starts: output quanta (Arm, default 1) or dB (Core ML, default 20).")
@click.option("--scan", type=click.IntRange(min=0), default=5, show_default=True, help="Layers to try in float (0: none).")
@click.option(
    "--target-sqnr", "target_sqnr", type=float, default=30.0, show_default=True,
    help="Output SQNR (dB) the keep-float advice aims for: the smallest set of layers to keep in float that reaches it.",
)
@click.option(
    "--search", type=click.IntRange(min=0), default=6, show_default=True,
    help="Trial lowerings for the keep-float set search beyond the single-layer scan (0: single layers only).",
)
@click.option("--top", type=click.IntRange(min=1), default=12, show_default=True, help="Table rows to print.")
@backend_flags("debug")
@click.option("-q", "--quiet", is_flag=True, help="No progress display.")
@source_options
def debug_command(
    model: str,
    target_name: str,
    calibration: Path | None,
    output: Path | None,
    as_json: bool,
    keep_float: tuple[str, ...],
    threshold: float | None,
    scan: int,
    target_sqnr: float,
    search: int,
    top: int,
    given: Given,
    quiet: bool,
    source_options: SourceOptions,
) -> None:
    """Compare MODEL's quantized lowering with float layer by layer; name where the error starts and what fixes it."""
    target = targets.get(target_name)
    backend = targets.backend_of(target)
    if not backend.debuggable(target):
        debuggable = targets.describe(lambda t: targets.backend_of(t).debuggable(t))
        raise UsageError(f"debug compares lowered layers with float: use {debuggable}; not '{target.name}'")
    taken = targets.check_applicable(target, given, warn=[])
    if output is not None:
        atomic.check_writable(output)
    from lowerkit.cli import calibration as calibration_data
    from lowerkit.cli import keep_float as kept
    from lowerkit.cli import model_source
    from lowerkit.cli.progress import Steps
    from lowerkit.pass_infra.helpers.files import write_bytes_atomically

    source = model_source.load(model, source_options)
    names = kept.check(keep_float, source, target)
    warnings: list[str] = list(source.notes)
    batches = calibration_data.load(calibration, source, warn=warnings) if target.calibrates else []
    steps = Steps.for_terminal(quiet=quiet)
    with steps.step(f"debug {source.name} on {target.name}"):
        request = DebugRequest(batches, names, threshold, scan, target_sqnr, search, taken)
        report = _run(source, target, request)
    report.summary["total_seconds"] = round(sum(steps.seconds.values()), 1)
    report.summary["commands"] = _commands(model, target.name, calibration, names, report, source_options)
    for warning in warnings:
        click.echo(f"warning: {warning}", err=True)
    if output is not None:
        from lowerkit.cli.debug_html import render

        write_bytes_atomically(output, render(report).encode())
    if as_json:
        click.echo(json.dumps(report.to_json(), indent=2))
        return
    for line in table(report, top):
        click.echo(line)
    if output is not None:
        click.echo(f"wrote {output}")


def _run(source: Any, target: Target, request: DebugRequest) -> Any:
    """The target's backend's report; a failure past the user's input is one line."""
    from lowerkit.cli.lowering import as_lowering_error

    try:
        return targets.backend_of(target).debug(source, target, request)
    except CliError:
        raise
    except Exception as error:
        raise as_lowering_error(error, f"debugging {source.name} on {target.name}") from error


def _commands(
    model: str, target: str, calibration: Path | None, names: tuple[str, ...], report: Any, built: SourceOptions = DEFAULT
) -> list[str]:
    """The commands that reproduce the report and apply its advice."""
    base = ["lowerkit", "debug", model, *as_arguments(built), "-t", target]
    if calibration is not None:
        base += ["--calibration", str(calibration)]
    for name in names:
        base += ["--keep-float", name]
    if getattr(report, "bisection", None) is not None:
        base.append("--bisect")
    commands = [shlex.join(base)]
    advice = getattr(report, "keep_float_advice", None)
    gains = [s for s in report.sensitivity if s.gain_db > 0.5]
    if advice is not None and advice.helps:
        kept: tuple[str, ...] = tuple(advice.names)
    elif gains:
        kept = (max(gains, key=lambda s: s.gain_db).name,)
    else:
        return commands
    lower = ["lowerkit", "lower", model, *as_arguments(built), "-t", target, "-o", "model.pte", "--verify"]
    if calibration is not None:
        lower += ["--calibration", str(calibration)]
    for name in (*names, *kept):
        lower += ["--keep-float", name]
    commands.append(shlex.join(lower))
    return commands


def _number(value: float | None, digits: int = 1) -> str:
    if value is None:
        return "-"
    return f"{value:.{digits}f}" if math.isfinite(value) else str(value)


def _range_flag(report: Any, layer: Any) -> str:
    """The table's last column: the range verdict, or the producer a data-movement layer's error comes from."""
    if layer.range is not None and layer.range.flagged:
        return f"{layer.range.kind} channel {layer.range.channel} sets the scale"
    producer = report.producer(layer)
    return f"error from {producer.name}" if producer is not None and report.added_db(layer) > 0.5 else ""


def table(report: Any, top: int) -> list[str]:
    """The terminal view: the worst layers, the advice, the sensitivity scan and notes."""
    lines = [
        f"{report.model} on {report.target}: output SQNR {_number(report.output_sqnr_db)} dB against float; "
        f"{len(report.layers)} layers compared",
        f"{'layer':<28} {'op':<18} {'SQNR dB':>8} {'max err':>9} {'quanta':>8} {'cosine':>8} {'added dB':>9}  range",
    ]
    for layer in report.worst_first()[:top]:
        flag = _range_flag(report, layer)
        lines.append(
            f"{layer.name[:28]:<28} {layer.op[:18]:<18} {_number(layer.error.sqnr_db):>8} "
            f"{layer.error.max_abs_error:>9.3g} {_number(layer.error.max_error_quanta):>8} "
            f"{layer.error.cosine:>8.4f} {_number(report.added_db(layer)):>9}  {flag}"
        )
    if len(report.layers) > top:
        lines.append(f"... {len(report.layers) - top} more (--top, --json or -o report.html)")
    lines += [f"advice: {line}" for line in report.advice()]
    for result in report.sensitivity:
        lines.append(f"keep {result.name} in float: output {_number(result.output_sqnr_db)} dB ({result.gain_db:+.1f} dB)")
    advice = getattr(report, "keep_float_advice", None)
    if advice is not None:
        for trial in advice.trials:
            if len(trial.names) > 1:
                lines.append(f"keep {', '.join(trial.names)} in float: output {_number(trial.output_sqnr_db)} dB")
    if getattr(report, "bisection", None) is not None:
        lines.append(report.bisection.line())
    lines += [f"note: {note}" for note in report.notes]
    return lines
