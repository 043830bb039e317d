"""Run a fleet's jobs in worker processes; one failure never stops the others."""

from __future__ import annotations

import multiprocessing
import time
from collections.abc import Callable, Iterator
from concurrent.futures import ProcessPoolExecutor, as_completed
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from lowerkit.cli.fleet.spec import Job

if TYPE_CHECKING:
    from lowerkit.cli.cache.cached import CacheSettings


@dataclass(frozen=True)
class CacheArgs:
    """The cache options of `lowerkit build`, passed to each worker."""

    no_cache: bool = False
    remote: str | None = None
    remote_read_only: bool = False


@dataclass
class Row:
    """One job's outcome: the summary table's row and its --json object."""

    model: str
    target: str
    cache: str
    seconds: float
    bytes: int
    verify: str
    output: str
    error: str | None = None

    def to_json(self) -> dict[str, Any]:
        """The row as a JSON object."""
        return asdict(self)


def run(
    jobs: list[Job], out_dir: Path, *, workers: int, cache: CacheArgs, done: Callable[[Row], None]
) -> list[Row]:
    """Lower every job into `out_dir` with `workers` processes; rows in job order, `done` as each ends."""
    rows: dict[int, Row] = {}
    for job, row in _outcomes(jobs, out_dir, workers, cache):
        rows[job.index] = row
        done(row)
    return [rows[job.index] for job in jobs]


def _outcomes(jobs: list[Job], out_dir: Path, workers: int, cache: CacheArgs) -> Iterator[tuple[Job, Row]]:
    if workers <= 1 or len(jobs) <= 1:
        settings = _settings(cache)
        for job in jobs:
            yield job, lower_job(job, out_dir, settings)
        return
    # spawn: torch and ExecuTorch are not fork-safe once imported.
    context = multiprocessing.get_context("spawn")
    pool = ProcessPoolExecutor(
        max_workers=min(workers, len(jobs)), mp_context=context, initializer=_start_worker, initargs=(cache,)
    )
    with pool:
        futures = {pool.submit(_lower_in_worker, job, out_dir): job for job in jobs}
        for future in as_completed(futures):
            job = futures[future]
            try:
                yield job, future.result()
            except Exception as error:  # a worker died (killed, out of memory)
                yield job, _failed(job, out_dir, 0.0, f"worker failed: {type(error).__name__}: {error}")


#: The worker process's CacheSettings (set by `_start_worker`).
_WORKER: dict[str, Any] = {}


def _start_worker(cache: CacheArgs) -> None:
    """Set up a worker process: quiet libraries, one CacheSettings (a dead remote warns once per worker)."""
    from lowerkit.cli.quiet import quiet_libraries

    quiet_libraries()
    _WORKER["settings"] = _settings(cache)


def _lower_in_worker(job: Job, out_dir: Path) -> Row:
    return lower_job(job, out_dir, _WORKER["settings"])


def lower_job(job: Job, out_dir: Path, settings: CacheSettings) -> Row:
    """Lower one job through the cache and write its .pte; any error becomes the row's one-line `error`."""
    start = time.perf_counter()
    try:
        return _lower(job, out_dir, settings, start)
    except Exception as error:
        from lowerkit.cli.errors import CliError

        text = str(error) if isinstance(error, CliError) else f"{type(error).__name__}: {error}"
        return _failed(job, out_dir, time.perf_counter() - start, text.strip().splitlines()[0] if text.strip() else "no detail")


def _lower(job: Job, out_dir: Path, settings: CacheSettings, start: float) -> Row:
    from lowerkit.cli import targets
    from lowerkit.cli.cache import cached
    from lowerkit.cli.options import LowerOptions
    from lowerkit.cli.progress import Steps
    from lowerkit.pass_infra.helpers.files import write_bytes_atomically

    target = targets.get(job.target)
    backend_settings = targets.check_options(target, dict(job.given), warn=[])
    options = LowerOptions(target, calibration_path=job.calibration, verify=job.verify, settings=backend_settings)
    lowered = cached.lower_model(job.model, options, steps=Steps(show=False), cache=settings, source_options=job.source)
    output = out_dir / job.output_name
    write_bytes_atomically(output, lowered.pte)
    return Row(
        model=job.model,
        target=job.target,
        cache=lowered.cache,
        seconds=round(time.perf_counter() - start, 3),
        bytes=len(lowered.pte),
        verify=targets.backend_of(target).short_verification(lowered.verification) if job.verify else "-",
        output=str(output),
    )


def _settings(cache: CacheArgs) -> CacheSettings:
    from lowerkit.cli.cache import commands

    settings: CacheSettings = commands.settings(
        no_cache=cache.no_cache, cache_remote=cache.remote, cache_remote_read_only=cache.remote_read_only
    )
    return settings


def _failed(job: Job, out_dir: Path, seconds: float, error: str) -> Row:
    return Row(job.model, job.target, "-", round(seconds, 3), 0, "-", str(out_dir / job.output_name), error)
