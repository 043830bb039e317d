"""The `lowerkit` command line."""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path
from typing import Any

import click

from lowerkit import zoo
from lowerkit.cli import atomic, calibration, inspect_pte, model_source, targets
from lowerkit.cli.errors import CliError, LoweringError, UsageError
from lowerkit.cli.progress import Steps
from lowerkit.cli.result import Lowered


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
def main() -> None:
    """lowerkit: lower PyTorch models to Core ML and Arm (TOSA / Ethos-U) ExecuTorch programs."""


@main.command("targets")
@click.option("--json", "as_json", is_flag=True, help="Print JSON.")
def targets_command(as_json: bool) -> None:
    """List the lowering targets."""
    rows = [{"name": t.name, "backend": t.backend, "summary": t.summary} for t in targets.TARGETS.values()]
    if as_json:
        click.echo(json.dumps(rows, indent=2))
        return
    for row in rows:
        click.echo(f"{row['name']:<20} {row['backend']:<7} {row['summary']}")


@main.command("zoo")
@click.option("--json", "as_json", is_flag=True, help="Print JSON.")
def zoo_command(as_json: bool) -> None:
    """List the built-in models (use them as zoo:NAME)."""
    if as_json:
        rows = [
            {
                "name": m.name,
                "parameters": m.parameter_count(),
                "inputs": [list(t.shape) for t in m.example_inputs()],
                "backends": list(m.backends),
                "description": m.description,
            }
            for m in zoo.models()
        ]
        click.echo(json.dumps(rows, indent=2))
        return
    for m in zoo.models():
        click.echo(
            f"zoo:{m.name:<18} {m.parameter_count():>8} params  "
            f"{'/'.join(m.backends):<11} {m.description}"
        )


@main.command("lower")
@click.argument("model")
@click.option("-t", "--target", "target_name", required=True, help="Target (see 'lowerkit targets').")
@click.option("-o", "--output", type=click.Path(path_type=Path), required=True, help="The .pte to write.")
@click.option("--calibration", type=click.Path(path_type=Path), help="A .pt file or folder of saved input tensors.")
@click.option("--coreml-passes", help="Core ML MIL pass names, comma-separated, or @FILE (one per line).")
@click.option("--report", type=click.Path(path_type=Path), help="Write a JSON report (steps, passes, sizes).")
@click.option("--json", "as_json", is_flag=True, help="Print the result as JSON.")
@click.option("-q", "--quiet", is_flag=True, help="No progress display.")
def lower_command(
    model: str,
    target_name: str,
    output: Path,
    calibration: Path | None,
    coreml_passes: str | None,
    report: Path | None,
    as_json: bool,
    quiet: bool,
) -> None:
    """Lower MODEL (zoo:NAME, FILE.pt2 or package.module:factory) to a .pte."""
    target = targets.get(target_name)
    atomic.check_writable(output)
    if report is not None:
        atomic.check_writable(report)
    pass_names = _pass_names(coreml_passes) if coreml_passes else None
    if pass_names is not None and target.backend != "coreml":
        raise UsageError(f"--coreml-passes applies to Core ML targets, not '{target.name}'")
    source = model_source.load(model)
    lowered = _lower(source, target, calibration, pass_names, quiet=quiet)
    atomic.write_bytes(output, lowered.pte)
    summary = _summary(lowered, output)
    if report is not None:
        atomic.write_bytes(report, (json.dumps(summary, indent=2) + "\n").encode())
    for warning in lowered.warnings:
        click.echo(f"warning: {warning}", err=True)
    if as_json:
        click.echo(json.dumps(summary, indent=2))
    else:
        click.echo(f"wrote {output} ({len(lowered.pte):,} bytes) for {target.name} in {sum(lowered.seconds.values()):.1f} s")


@main.command("inspect")
@click.argument("pte", type=click.Path(path_type=Path))
@click.option("--json", "as_json", is_flag=True, help="Print JSON.")
def inspect_command(pte: Path, as_json: bool) -> None:
    """Show the methods, delegates and CPU ops of a .pte file."""
    summary = inspect_pte.summarize(pte)
    if as_json:
        click.echo(json.dumps(summary.to_json(), indent=2))
        return
    click.echo(f"{summary.path}: {summary.size_bytes:,} bytes")
    for method in summary.methods:
        click.echo(f"  method {method.name}: {method.inputs} inputs, {method.outputs} outputs")
        for delegate in method.delegates:
            click.echo(f"    delegate {delegate.backend_id}: payload {delegate.payload_bytes:,} bytes")
        click.echo(f"    ops on CPU: {', '.join(method.cpu_ops) if method.cpu_ops else 'none'}")


@main.command("demo")
@click.option("-o", "--output-dir", type=click.Path(path_type=Path), default=Path("lowerkit-demo"), show_default=True)
@click.option("-q", "--quiet", is_flag=True, help="No progress display.")
def demo_command(output_dir: Path, quiet: bool) -> None:
    """Lower zoo models to several targets and print a table of time and size."""
    output_dir.mkdir(parents=True, exist_ok=True)
    rows = []
    for model_name, target_name in DEMO_RUNS:
        target = targets.get(target_name)
        source = model_source.load(f"zoo:{model_name}")
        lowered = _lower(source, target, None, None, quiet=quiet)
        path = output_dir / f"{model_name}.{target_name}.pte"
        atomic.write_bytes(path, lowered.pte)
        delegates = inspect_pte.summarize(path).methods[0].delegates
        rows.append((model_name, target_name, sum(lowered.seconds.values()), len(lowered.pte), len(delegates)))
    click.echo(f"{'model':<18} {'target':<18} {'seconds':>8} {'bytes':>10} {'delegates':>9}")
    for model_name, target_name, seconds, size, delegates_count in rows:
        click.echo(f"{model_name:<18} {target_name:<18} {seconds:>8.1f} {size:>10,} {delegates_count:>9}")
    click.echo(f"wrote {len(rows)} programs to {output_dir}/")


DEMO_RUNS: list[tuple[str, str]] = [
    ("conv_linear", "coreml"),
    ("resnet8", "coreml"),
    ("tiny_lm", "coreml-w8"),
]


def _lower(
    source: model_source.ModelSource,
    target: targets.Target,
    calibration_path: Path | None,
    pass_names: list[str] | None,
    *,
    quiet: bool,
) -> Lowered:
    warnings: list[str] = []
    batches = calibration.load(calibration_path, source, warn=warnings) if target.calibrates else []
    steps = Steps.for_terminal(quiet=quiet)
    from lowerkit.cli import coreml

    try:
        lowered = coreml.lower(source, target, calibration=batches, pass_names=pass_names, steps=steps)
    except CliError:
        raise
    except Exception as error:
        if os.environ.get("LOWERKIT_DEBUG"):
            raise
        detail = str(error).strip().splitlines()[0] if str(error).strip() else "no detail"
        raise LoweringError(
            f"lowering {source.name} to {target.name} failed: {type(error).__name__}: {detail} "
            "(set LOWERKIT_DEBUG=1 for the traceback)"
        ) from error
    lowered.warnings.extend(warnings)
    return lowered


def _pass_names(value: str) -> list[str]:
    if value.startswith("@"):
        path = Path(value[1:])
        if not path.is_file():
            raise UsageError(f"Core ML pass file '{path}' does not exist")
        lines = path.read_text().splitlines()
        return [line.strip() for line in lines if line.strip() and not line.startswith("#")]
    return [name.strip() for name in value.split(",") if name.strip()]


def _summary(lowered: Lowered, output: Path) -> dict[str, Any]:
    return {
        "model": lowered.model,
        "target": lowered.target.name,
        "output": str(output),
        "pte_bytes": len(lowered.pte),
        "seconds": lowered.seconds,
        "passes": lowered.passes,
        "cpu_ops": lowered.cpu_ops,
        "warnings": lowered.warnings,
    }


def run_app(argv: list[str] | None = None) -> None:
    """Run the CLI, turning user errors into one line and an exit code."""
    try:
        main(args=argv, standalone_mode=False)
    except CliError as error:
        click.echo(f"lowerkit: error: {error}", err=True)
        sys.exit(error.exit_code)
    except (click.exceptions.Abort, KeyboardInterrupt):
        click.echo("lowerkit: interrupted; no output was written", err=True)
        sys.exit(130)
    except click.ClickException as error:
        error.show()
        sys.exit(error.exit_code)
    sys.exit(0)
