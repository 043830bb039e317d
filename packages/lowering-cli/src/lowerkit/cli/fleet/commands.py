"""`lowerkit build FLEET.toml`: the command, its progress display and its summary table."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import TYPE_CHECKING

import click

from lowerkit.cli.cache.commands import cache_options
from lowerkit.cli.errors import LoweringError, UsageError

if TYPE_CHECKING:
    from lowerkit.cli.fleet import runner


@click.command("build")
@click.argument("fleet", type=click.Path(path_type=Path))
@click.option("-o", "--output-dir", type=click.Path(path_type=Path), default=Path("lowerkit-fleet"), show_default=True)
@click.option("-j", "--jobs", "workers", type=click.IntRange(min=1), default=1, show_default=True, help="Worker processes.")
@click.option("--shard", metavar="I/N", help="Build only the I-th of N shares of the fleet (1-based), e.g. for N CI machines.")
@click.option("--list", "list_only", is_flag=True, help="Print the jobs (of this shard) and stop; checks FLEET.")
@click.option("--json", "as_json", is_flag=True, help="Print the rows as JSON.")
@click.option("-q", "--quiet", is_flag=True, help="No progress display.")
@cache_options
def build_command(
    fleet: Path,
    output_dir: Path,
    workers: int,
    shard: str | None,
    list_only: bool,
    as_json: bool,
    quiet: bool,
    no_cache: bool,
    cache_remote: str | None,
    cache_remote_read_only: bool,
) -> None:
    """Lower every model x target of FLEET (a TOML file, see README) into OUTPUT_DIR/MODEL.TARGET.pte."""
    from lowerkit.cli.cache.remote import parse_address
    from lowerkit.cli.fleet import runner, spec

    jobs = spec.shard(spec.load(fleet), shard)
    if list_only:
        for job in jobs:
            click.echo(f"{job.model:<32} {job.target:<18} {job.output_name}")
        return
    if cache_remote:
        try:
            parse_address(cache_remote)
        except ValueError as error:
            raise UsageError(f"{error} (--cache-remote / LOWERKIT_CACHE_REMOTE)") from None
    if output_dir.exists() and not output_dir.is_dir():
        raise UsageError(f"output folder '{output_dir}' is a file; give a folder")
    output_dir.mkdir(parents=True, exist_ok=True)
    cache = runner.CacheArgs(no_cache=no_cache, remote=cache_remote, remote_read_only=cache_remote_read_only)
    progress = _Progress(len(jobs), show=not quiet)
    try:
        rows = runner.run(jobs, output_dir, workers=workers, cache=cache, done=progress.advance)
    finally:
        progress.close()
    failures = [row for row in rows if row.error is not None]
    if as_json:
        click.echo(json.dumps({"jobs": [row.to_json() for row in rows], "failed": len(failures)}, indent=2))
    else:
        _table(rows)
    if failures:
        named = "; ".join(f"{row.model} -> {row.target}: {row.error}" for row in failures)
        raise LoweringError(f"{len(failures)} of {len(rows)} lowerings failed: {named}")


def _table(rows: list[runner.Row]) -> None:
    click.echo(f"{'model':<24} {'target':<18} {'cache':<5} {'seconds':>8} {'bytes':>10}  verify")
    for row in rows:
        verify = f"FAILED: {row.error}" if row.error else row.verify
        click.echo(f"{row.model:<24} {row.target:<18} {row.cache:<5} {row.seconds:>8.1f} {row.bytes:>10,}  {verify}")
    hits = sum(row.cache == "hit" for row in rows)
    total = sum(row.seconds for row in rows)
    click.echo(f"{len(rows)} lowerings, {hits} from the cache, {total:.1f} s of lowering time")


class _Progress:
    """A progress bar on a terminal; otherwise one line per finished lowering on stderr."""

    def __init__(self, total: int, *, show: bool) -> None:
        self._total, self._count, self._show = total, 0, show
        self._bar = None
        if show and sys.stderr.isatty():
            from rich.progress import Progress

            self._bar = Progress(transient=True)
            self._task = self._bar.add_task("lowering", total=total)
            self._bar.start()

    def advance(self, row: runner.Row) -> None:
        self._count += 1
        if self._bar is not None:
            self._bar.update(self._task, advance=1, description=f"{row.model} {row.target}")
        elif self._show:
            state = "FAILED" if row.error else row.cache
            click.echo(f"[{self._count}/{self._total}] {row.model} -> {row.target}: {state} ({row.seconds:.1f} s)", err=True)

    def close(self) -> None:
        if self._bar is not None:
            self._bar.stop()
