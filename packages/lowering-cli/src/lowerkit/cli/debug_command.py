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
from lowerkit.cli.errors import CliError, UsageError
from lowerkit.cli.sources.flags import as_arguments, source_options
from lowerkit.cli.sources.options import DEFAULT, SourceOptions

#: Core ML targets `debug` compares layer by layer (every Arm target is compared too).
COREML_DEBUG_TARGETS = ("coreml-int8", "coreml-w8", "coreml-w4", "coreml-palettize4")


def _debuggable(target: targets.Target) -> bool:
    return target.backend == "arm" or target.name in COREML_DEBUG_TARGETS or target.name.startswith("coreml-palettize")


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
@click.option(
    "--bisect", is_flag=True,
    help="Arm INT: name the first pass after which the lowered graph's outputs leave the fake-quant program's "
    "(run anyway when the TOSA graph and the fake-quant program disagree beyond --threshold).",
)
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
    bisect: bool,
    quiet: bool,
    weights: Path | None,
    task: str | None,
    random_weights: bool,
    sequence_length: int | None,
    image_size: int | None,
) -> None:
    """Compare MODEL's quantized lowering with float layer by layer; name where the error starts and what fixes it."""
    target = targets.get(target_name)
    if not _debuggable(target):
        raise UsageError(
            f"debug compares lowered layers with float: use an Arm target or one of "
            f"{', '.join(COREML_DEBUG_TARGETS)} (or coreml-palettize*), not '{target.name}'"
        )
    if bisect and target.backend != "arm":
        raise UsageError(f"--bisect bisects the Arm pass pipeline; '{target.name}' is not an Arm target")
    if output is not None:
        atomic.check_writable(output)
    from lowerkit.cli import calibration as calibration_data
    from lowerkit.cli import keep_float as kept
    from lowerkit.cli import model_source
    from lowerkit.cli.progress import Steps
    from lowerkit.pass_infra.files import write_bytes_atomically

    built = SourceOptions(weights, task, random_weights, sequence_length, image_size)
    source = model_source.load(model, built)
    names = kept.check(keep_float, source, target)
    warnings: list[str] = list(source.notes)
    batches = calibration_data.load(calibration, source, warn=warnings) if target.calibrates else []
    steps = Steps.for_terminal(quiet=quiet)
    with steps.step(f"debug {source.name} on {target.name}"):
        report = _run(source, target.name, batches, names, threshold, scan, bisect, target_sqnr, search)
    report.summary["total_seconds"] = round(sum(steps.seconds.values()), 1)
    report.summary["commands"] = _commands(model, target.name, calibration, names, report, built)
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


def _run(
    source: Any, target: str, batches: list[Any], names: tuple[str, ...], threshold: float | None, scan: int,
    bisect: bool = False, target_sqnr: float = 30.0, search: int = 6,
) -> Any:
    from lowerkit.cli.lowering import as_lowering_error

    model = source.module if source.module is not None else source.export()
    try:
        if target.startswith("coreml-") and target != "coreml-int8":
            from lowerkit.coreml_preprocess.numerics import (
                NoQuantizedLayerError as NothingCompressed,
            )
            from lowerkit.coreml_preprocess.numerics import debug_coreml_weights

            try:
                return debug_coreml_weights(model, source.example_inputs, target.removeprefix("coreml-"), model_name=source.name)
            except NothingCompressed as error:
                raise UsageError(str(error)) from None
        if target == "coreml-int8":
            from lowerkit.coreml_preprocess.numerics import NoQuantizedLayerError as CoreMLNone
            from lowerkit.coreml_preprocess.numerics import debug_coreml

            try:
                return debug_coreml(
                    model, source.example_inputs, calibration=batches or None, keep_float=names,
                    threshold_db=20.0 if threshold is None else threshold, scan=scan, model_name=source.name,
                    target_sqnr_db=target_sqnr, search=search,
                )
            except CoreMLNone as error:
                raise UsageError(str(error)) from None
        from lowerkit.arm_passes.numerics.debug import NoQuantizedLayerError, debug_arm
        from lowerkit.cli.arm import ARM_TARGET_NAMES

        try:
            return debug_arm(
                model, source.example_inputs, ARM_TARGET_NAMES[target], calibration=batches or None,
                keep_float=names, threshold_quanta=1.0 if threshold is None else threshold, scan=scan,
                model_name=source.name, bisect=True if bisect else None, target_sqnr_db=target_sqnr, search=search,
            )
        except NoQuantizedLayerError as error:
            raise UsageError(str(error)) from None
    except CliError:
        raise
    except Exception as error:
        raise as_lowering_error(error, f"debugging {source.name} on {target}") from error


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
