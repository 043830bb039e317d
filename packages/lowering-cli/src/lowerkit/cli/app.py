"""The `lowerkit` command line.

Start-up imports only click and the standard library: `--help`, `targets` and `zoo` import
neither torch nor ExecuTorch, `inspect` imports coremltools only to decode Core ML weights, and
`lower` imports the one backend its target needs (see `lowering`).
"""

from __future__ import annotations

import json
import sys
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import TYPE_CHECKING, Any

import click

from lowerkit.cli import accelerations, atomic, debug_command, inspect_pte, targets
from lowerkit.cli.backend import Given, is_given
from lowerkit.cli.backend_flags import backend_flags, parsed, written_files
from lowerkit.cli.cache import commands as cache_commands
from lowerkit.cli.daemon import commands as daemon_commands
from lowerkit.cli.errors import CliError, UsageError
from lowerkit.cli.fleet import commands as fleet_commands
from lowerkit.cli.options import LowerOptions, Target
from lowerkit.cli.sources.flags import source_options
from lowerkit.cli.sources.hf_llm import DEFAULT_MAX_SEQ_LEN
from lowerkit.cli.sources.options import LLM_TASK, SourceOptions
from lowerkit.pass_infra.helpers.files import write_bytes_atomically
from lowerkit.zoo import catalogue

if TYPE_CHECKING:
    from lowerkit.cli import llm
    from lowerkit.cli.cache.cached import CacheSettings
    from lowerkit.cli.result import Lowered


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
def main() -> None:
    """lowerkit: lower PyTorch models to Core ML and Arm (TOSA / Ethos-U) ExecuTorch programs."""


def _echo(data: Any, render: Callable[[Any], Iterable[str]], as_json: bool) -> None:
    """`data` as JSON (``--json``), else the lines `render` makes of it."""
    if as_json:
        click.echo(json.dumps(data, indent=2))
        return
    for line in render(data):
        click.echo(line)


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
                "parameters": m.parameters,
                "inputs": [list(shape) for shape in m.input_shapes],
                "backends": list(m.backends),
                "description": m.description,
            }
            for m in catalogue.ENTRIES
        ]
        click.echo(json.dumps(rows, indent=2))
        return
    for m in catalogue.ENTRIES:
        click.echo(f"zoo:{m.name:<18} {m.parameters:>8} params  {'/'.join(m.backends):<11} {m.description}")


@main.command("models")
@click.option("--check", is_flag=True, help="Also import torchvision and timm to say whether they work here (imports torch).")
@click.option("--json", "as_json", is_flag=True, help="Print JSON.")
def models_command(check: bool, as_json: bool) -> None:
    """List what each model source (zoo:, et:, tv:, hf:) can build here."""
    from lowerkit.cli.sources import listing

    _echo(listing.rows(check=check), listing.render, as_json)


@main.command("lower")
@click.argument("model")
@click.option("-t", "--target", "target_name", required=True, help="Target (see 'lowerkit targets').")
@click.option("-o", "--output", type=click.Path(path_type=Path), required=True, help="The .pte to write.")
@click.option("--calibration", type=click.Path(path_type=Path), help="A .pt file or folder of saved input tensors.")
@backend_flags("lower")
@click.option("--report", type=click.Path(path_type=Path), help="Write a JSON report (steps, passes, sizes; Ethos-U: Vela's NPU report).")
@click.option("--verify", is_flag=True, help="Check the result against the float model (see README).")
@click.option("--keep-float", "keep_float", multiple=True, metavar="LAYER", help="Leave this module in float (repeatable; see 'lowerkit debug').")
@click.option("--json", "as_json", is_flag=True, help="Print the result as JSON.")
@click.option("-q", "--quiet", is_flag=True, help="No progress display.")
@click.option("--max-seq-len", type=click.IntRange(min=2), help=f"--task {LLM_TASK}: the KV cache's positions (default {DEFAULT_MAX_SEQ_LEN}).")
@click.option("--llm-override", "llm_overrides", multiple=True, metavar="KEY=VALUE", help=f"--task {LLM_TASK}: an export_llm setting (repeatable), e.g. backend.coreml.quantize=c4w (with --prefill: the exporter's flag, e.g. dtype=fp32).")
@click.option("--prefill", type=click.IntRange(min=1), metavar="N", help=f"--task {LLM_TASK}, Core ML: a prefill method taking N tokens beside the decode method (ExecuTorch's export_static_llm_coreml).")
@source_options
@cache_commands.cache_options
def lower_command(
    model: str,
    target_name: str,
    output: Path,
    calibration: Path | None,
    given: Given,
    report: Path | None,
    verify: bool,
    keep_float: tuple[str, ...],
    as_json: bool,
    quiet: bool,
    max_seq_len: int | None,
    llm_overrides: tuple[str, ...],
    prefill: int | None,
    source_options: SourceOptions,
    no_cache: bool,
    cache_remote: str | None,
    cache_remote_read_only: bool,
) -> None:
    """Lower MODEL (zoo:NAME, et:NAME, hf:DIR, tv:NAME, FILE.pt2 or package.module:factory) to a .pte.

    hf:DIR --task text-generation: the KV-cache program ExecuTorch's LLM runner generates with,
    built by ExecuTorch's LLM export (see 'lowerkit models').
    """
    # Parse (the outputs must be writable before a pass file is read).
    target = targets.get(target_name)
    if source_options.task == LLM_TASK:
        refused = [flag for flag, value in given.items() if is_given(value)] + [
            flag for flag, value in (("--calibration", calibration), ("--report", report), ("--verify", verify),
                                     ("--keep-float", keep_float)) if value
        ] + [flag for flag in source_options.given() if flag != "--task"]  # fmt: skip
        if refused:
            raise UsageError(f"{refused[0]} does not apply to --task {LLM_TASK} (export_llm's settings: --llm-override KEY=VALUE)")
        _lower_text_generation(model, target, output, max_seq_len or DEFAULT_MAX_SEQ_LEN, llm_overrides, prefill, quiet=quiet,
                               as_json=as_json, cache=cache_commands.settings(no_cache=no_cache, cache_remote=cache_remote,
                                                                              cache_remote_read_only=cache_remote_read_only))
        return
    if max_seq_len is not None or llm_overrides or prefill is not None:
        raise UsageError(f"--max-seq-len, --llm-override and --prefill apply to --task {LLM_TASK}")
    backend = targets.backend_of(target)
    for path in (output, report, *written_files(given)):
        if path is not None:
            atomic.check_writable(path)
    given = parsed(given)
    # Validate the options against the target's backend, before any work.
    setting_warnings: list[str] = []
    settings = targets.check_options(target, given, warn=setting_warnings)
    from lowerkit.cli.cache import cached
    from lowerkit.cli.progress import Steps

    cache = cache_commands.settings(
        no_cache=no_cache, cache_remote=cache_remote, cache_remote_read_only=cache_remote_read_only
    )
    steps = Steps.for_terminal(quiet=quiet)
    kept_float: tuple[str, ...] = ()
    if keep_float:  # checked against the model's modules, so the model is loaded here
        from lowerkit.cli import keep_float as kept
        from lowerkit.cli import model_source

        kept_float = kept.check(keep_float, model_source.load(model, source_options), target)
    options = LowerOptions(target, calibration_path=calibration, verify=verify, keep_float=kept_float, settings=settings)
    # Lower, through the cache.
    lowered = cached.lower_model(model, options, steps=steps, cache=cache, source_options=source_options)
    lowered.warnings[:0] = setting_warnings
    # Write.
    write_bytes_atomically(output, lowered.pte)
    written = backend.write_outputs(lowered, options, given)
    summary = _summary(lowered, output)
    if report is not None:
        write_bytes_atomically(report, (json.dumps(summary, indent=2) + "\n").encode())
    for warning in lowered.warnings:
        click.echo(f"warning: {warning}", err=True)
    if as_json:
        click.echo(json.dumps(summary, indent=2))
        return
    click.echo(
        f"wrote {output} ({len(lowered.pte):,} bytes) for {target.name} in {sum(lowered.seconds.values()):.1f} s"
        f" (cache {lowered.cache})"
    )
    for line in (*written, *backend.result_lines(lowered)):
        click.echo(line)
    if lowered.verification:
        click.echo(f"verify: {_verification_line(lowered.verification)}")


def _lower_text_generation(
    model: str, target: Target, output: Path, max_seq_len: int, overrides: tuple[str, ...], prefill: int | None, *,
    quiet: bool, as_json: bool, cache: CacheSettings,
) -> None:
    from lowerkit.cli import text_generation
    from lowerkit.cli.progress import Steps

    atomic.check_writable(output)
    done = text_generation.lower(
        model, target, output, max_seq_len=max_seq_len, overrides=overrides, cache=cache, steps=Steps.for_terminal(quiet=quiet),
        prefill=prefill,
    )
    methods = "" if prefill is None else f", prefill ({prefill} tokens) and decode methods"
    if not as_json:
        _echo_llm_export(done, f" for {target.name}{methods}")
        return
    for warning in done.warnings:
        click.echo(f"warning: {warning}", err=True)
    summary = {"model": model, "target": target.name, "task": LLM_TASK, "prefill": prefill, "output": str(done.pte),
               "bytes": done.pte.stat().st_size, "seconds": round(done.seconds, 3), "cache": done.cache,
               "files": [str(p) for p in done.files], "tokenizer": str(done.tokenizer) if done.tokenizer else None}  # fmt: skip
    click.echo(json.dumps(summary, indent=2))


def _echo_llm_export(done: llm.LlmExport, what: str = "") -> None:
    """What an LLM export wrote (its warnings on stderr), a line a file."""
    from lowerkit.cli import llm

    for warning in done.warnings:
        click.echo(f"warning: {warning}", err=True)
    size = done.pte.stat().st_size
    click.echo(f"wrote {llm.relative(done.pte)} ({size:,} bytes){what} in {done.seconds:.1f} s (cache {done.cache})")
    for path in done.files:
        click.echo(f"wrote {llm.relative(path)}")
    if done.tokenizer is not None:
        click.echo(f"tokenizer for ExecuTorch's LLM runner (--tokenizer_path): {llm.relative(done.tokenizer)}")


def _verification_line(check: dict[str, Any]) -> str:
    parts = [f"{key}={value:.4g}" if isinstance(value, float) else f"{key}={value}" for key, value in check.items() if key not in ("note", "compared")]
    text = ", ".join(parts) if parts else "nothing to compare"
    if "compared" in check:
        text += f" ({check['compared']})"
    if "note" in check:
        text += f". {check['note']}"
    return text


@main.command("llm", context_settings={"ignore_unknown_options": True})
@click.option("--config", "config_file", type=click.Path(path_type=Path), help="An LlmConfig YAML file (export_llm's --config).")
@click.argument("overrides", nargs=-1)
@click.option("-q", "--quiet", is_flag=True, help="No progress display.")
@cache_commands.cache_options
def llm_command(
    config_file: Path | None,
    overrides: tuple[str, ...],
    quiet: bool,
    no_cache: bool,
    cache_remote: str | None,
    cache_remote_read_only: bool,
) -> None:
    """ExecuTorch's LLM export, faster: export_llm's arguments (--config FILE.yaml, key=value overrides).

    Writes what `python -m executorch.extension.llm.export.export_llm` writes (the same bytes,
    Core ML: the same model), through the lowering cache. E.g. lowerkit llm base.checkpoint=c.pth
    base.params=params.json model.use_kv_cache=true model.enable_dynamic_shape=false
    backend.coreml.enabled=true backend.coreml.ios=18 backend.coreml.quantize=c4w
    """
    from lowerkit.cli import llm
    from lowerkit.cli.progress import Steps

    cache = cache_commands.settings(
        no_cache=no_cache, cache_remote=cache_remote, cache_remote_read_only=cache_remote_read_only
    )
    config = llm.llm_config(config_file, overrides, light=True)
    _echo_llm_export(llm.export(config, cache=cache, steps=Steps.for_terminal(quiet=quiet)))


@main.command("inspect")
@click.argument("path", type=click.Path(path_type=Path))
@click.option("--weights/--no-weights", default=True, show_default=True, help="Decode Core ML weight formats.")
@click.option("--json", "as_json", is_flag=True, help="Print JSON.")
def inspect_command(path: Path, weights: bool, as_json: bool) -> None:
    """Show a .pte (methods, delegates, CPU ops, Vela / Core ML payloads), a .bpte, an ETRecord or a report."""
    from lowerkit.cli import inspect_files

    kind = inspect_files.kind_of(path)
    if kind == "report":
        _inspect_report(inspect_files.report(path), as_json)
        return
    if kind == "etrecord":
        record = inspect_files.etrecord_summary(path)
        if as_json:
            click.echo(json.dumps({"path": str(path), "kind": "etrecord", **record}, indent=2))
            return
        click.echo(f"{path}: ETRecord ({path.stat().st_size:,} bytes) for ExecuTorch's Inspector")
        click.echo(f"  records: {', '.join(record['records'])}")
        return
    bundle = inspect_files.bundle_summary(path) if kind == "bpte" else None
    summary = (
        inspect_pte.summarize_bytes(bundle["program"], str(path), weights=weights)
        if bundle is not None
        else inspect_pte.summarize(path, weights=weights)
    )
    if as_json:
        data = summary.to_json()
        if bundle is not None:
            data.update(kind="bpte", size_bytes=path.stat().st_size, program_bytes=len(bundle["program"]),
                        suites=bundle["suites"])
        click.echo(json.dumps(data, indent=2))
        return
    if bundle is not None:
        cases = sum(len(s["test_cases"]) for s in bundle["suites"])
        click.echo(
            f"{path}: bundled program ({path.stat().st_size:,} bytes): a {len(bundle['program']):,}-byte program "
            f"and {cases} test case(s) with reference outputs"
        )
        for suite in bundle["suites"]:
            first = suite["test_cases"][0] if suite["test_cases"] else {"inputs": [], "expected_outputs": []}
            click.echo(
                f"  {suite['method']}: {len(suite['test_cases'])} cases, inputs {', '.join(first['inputs'])} "
                f"-> expected {', '.join(first['expected_outputs'])}"
            )
    else:
        click.echo(f"{summary.path}: {summary.size_bytes:,} bytes")
    for method in summary.methods:
        click.echo(f"  method {method.name}: {method.inputs} inputs, {method.outputs} outputs")
        for delegate in method.delegates:
            click.echo(f"    delegate {delegate.backend_id}: payload {delegate.payload_bytes:,} bytes")
            for line in inspect_pte.delegate_lines(delegate):
                click.echo(line)
        click.echo(f"    ops on CPU: {', '.join(method.cpu_ops) if method.cpu_ops else 'none'}")


def _inspect_report(data: dict[str, Any], as_json: bool) -> None:
    if as_json:
        click.echo(json.dumps(data, indent=2))
        return
    click.echo(f"report of {data['output']}: {data['model']} for {data['target']}, {data['pte_bytes']:,} bytes")
    click.echo(f"  ops on CPU: {', '.join(data['cpu_ops']) or 'none'}")
    for backend in targets.BACKENDS.values():
        for line in backend.report_lines(data):
            click.echo(line)
    for warning in data.get("warnings", []):
        click.echo(f"  warning: {warning}")


@main.command("compare")
@click.argument("a", type=click.Path(path_type=Path))
@click.argument("b", type=click.Path(path_type=Path))
@click.option("--json", "as_json", is_flag=True, help="Print JSON.")
def compare_command(a: Path, b: Path, as_json: bool) -> None:
    """Show what changed between two lowerings: A and B are .pte / .bpte files or reports (lower --report)."""
    from lowerkit.cli import compare

    _echo(compare.compare(compare.load(a), compare.load(b)), compare.render, as_json)


@main.command("demo")
@click.option("-o", "--output-dir", type=click.Path(path_type=Path), default=Path("lowerkit-demo"), show_default=True)
@click.option("-q", "--quiet", is_flag=True, help="No progress display.")
def demo_command(output_dir: Path, quiet: bool) -> None:
    """Lower zoo models to several targets, verify them, and print time, size and checks."""
    from lowerkit.cli import lowering, model_source
    from lowerkit.cli.progress import Steps
    output_dir.mkdir(parents=True, exist_ok=True)
    click.echo(f"{'model':<18} {'target':<18} {'seconds':>8} {'bytes':>10}  {'delegates':<22} verify")
    for model_name, target_name in DEMO_RUNS:
        target = targets.get(target_name)
        source = model_source.load(f"zoo:{model_name}")
        steps = Steps.for_terminal(quiet=quiet)
        lowered = lowering.lower(source, LowerOptions(target, verify=True), steps=steps)
        path = output_dir / f"{model_name}.{target_name}.pte"
        write_bytes_atomically(path, lowered.pte)
        delegates = ", ".join(d.backend_id for d in inspect_pte.summarize(path).methods[0].delegates)
        click.echo(
            f"{model_name:<18} {target_name:<18} {sum(lowered.seconds.values()):>8.1f} "
            f"{len(lowered.pte):>10,}  {delegates or 'none':<22} "
            f"{targets.backend_of(target).short_verification(lowered.verification)}"
        )
    click.echo(f"wrote {len(DEMO_RUNS)} programs to {output_dir}/ (inspect them with 'lowerkit inspect')")
    for backend in targets.BACKENDS.values():
        if backend.demo and backend.verify_caveat:
            click.echo(backend.verify_caveat + ".")


#: (zoo model, target) pairs the demo lowers: each backend's (`Backend.demo`), in `lowerkit targets` order.
DEMO_RUNS: list[tuple[str, str]] = [run for backend in targets.BACKENDS.values() for run in backend.demo]


def _summary(lowered: Lowered, output: Path) -> dict[str, Any]:
    return {
        "model": lowered.model,
        "target": lowered.target.name,
        "output": str(output),
        "pte_bytes": len(lowered.pte),
        "seconds": lowered.seconds,
        **lowered.report,
        "passes": lowered.passes,
        "cpu_ops": lowered.cpu_ops,
        "verification": lowered.verification,
        "warnings": lowered.warnings,
        "cache": lowered.cache,
    }


main.add_command(debug_command.debug_command)
main.add_command(cache_commands.cache_group)
main.add_command(fleet_commands.build_command)
main.add_command(daemon_commands.daemon_group)
main.add_command(accelerations.accelerations_command)


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
