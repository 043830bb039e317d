"""A lowering through the cache: key it, serve a verified entry, or lower and store the result.

`lower_model` takes the MODEL argument: a hit for any source but a `package.module:factory`
builds nothing and imports neither torch nor ExecuTorch (see `key.source_key`); `lower` takes
a loaded `ModelSource`.
"""

from __future__ import annotations

import contextlib
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from lowerkit.cli.cache.entry import CorruptEntry, Entry
from lowerkit.cli.cache.remote import RemoteStore
from lowerkit.cli.cache.store import LocalStore
from lowerkit.cli.options import LowerOptions
from lowerkit.cli.progress import Steps
from lowerkit.cli.result import Lowered

if TYPE_CHECKING:
    from lowerkit.cli.sources.model import ModelSource
    from lowerkit.cli.sources.options import SourceOptions

_EXTRA = "extra/"


@dataclass
class CacheSettings:
    """Where lowerings are cached: off, a local store, and optionally a remote one."""

    enabled: bool = True
    local: LocalStore = field(default_factory=LocalStore)
    remote: RemoteStore | None = None


def lower_model(
    model: str, options: LowerOptions, *, steps: Steps, cache: CacheSettings, source_options: SourceOptions | None = None
) -> Lowered:
    """Lower the MODEL argument (see `model_source.load`) built as `source_options` say, through the cache."""
    from lowerkit.cli.sources.options import DEFAULT

    built = source_options or DEFAULT
    if not cache.enabled:
        from lowerkit.cli import model_source

        return lower(model_source.load(model, built), options, steps=steps, cache=cache)
    from lowerkit.cli.cache.key import source_key

    with steps.step("cache key"):
        key = source_key(model, built, options)
    if key is None:
        from lowerkit.cli import model_source

        return lower(model_source.load(model, built), options, steps=steps, cache=cache)
    with steps.step("cache lookup"):
        entry = lookup(key, cache)
    if entry is not None:
        return _from_entry(entry, str(entry.summary.get("model", model)), options, steps)
    from lowerkit.cli import model_source

    return _lower_and_store(key, model_source.load(model, built), options, steps, cache)


def lower(source: ModelSource, options: LowerOptions, *, steps: Steps, cache: CacheSettings) -> Lowered:
    """`lowering.lower` through the cache; `Lowered.cache` says hit, miss or off."""
    from lowerkit.cli import lowering

    if not cache.enabled:
        lowered = lowering.lower(source, options, steps=steps)
        lowered.cache = "off"
        return lowered
    from lowerkit.cli import calibration
    from lowerkit.cli.cache.key import lowering_key

    with steps.step("cache key"):
        batches = calibration.load(options.calibration_path, source, warn=[]) if options.target.calibrates else []
        key = lowering_key(source, options, batches)
    with steps.step("cache lookup"):
        entry = lookup(key, cache)
    if entry is not None:
        return _from_entry(entry, source.name, options, steps)
    return _lower_and_store(key, source, options, steps, cache)


def _lower_and_store(key: str, source: ModelSource, options: LowerOptions, steps: Steps, cache: CacheSettings) -> Lowered:
    from lowerkit.cli import lowering

    lowered = lowering.lower(source, options, steps=steps)
    lowered.cache = "miss"
    lowered.warnings += store(_to_entry(key, lowered), cache)
    return lowered


def store(entry: Entry, cache: CacheSettings) -> list[str]:
    """Put `entry` in the local store and the remote one; warnings (a full or read-only disk does not fail the work)."""
    data = entry.encode()
    warnings = []
    try:
        cache.local.put_bytes(entry.key, data)
    except OSError as error:
        warnings.append(
            f"could not write the lowering cache in {cache.local.directory} ({error.strerror or error}); "
            "set LOWERKIT_CACHE_DIR to a writable folder or pass --no-cache"
        )
    if cache.remote is not None:
        cache.remote.put(entry.key, data)
    return warnings


def lookup(key: str, cache: CacheSettings) -> Entry | None:
    """The entry for `key`, from the local store, else the remote one (then kept locally); None on a miss."""
    entry = cache.local.get(key)
    if entry is not None or cache.remote is None:
        return entry
    data = cache.remote.get(key)
    if data is None:
        return None
    try:
        entry = Entry.decode(data, key=key)
    except CorruptEntry:
        return None
    with contextlib.suppress(OSError):
        cache.local.put_bytes(key, data)
    return entry


def _to_entry(key: str, lowered: Lowered) -> Entry:
    summary: dict[str, Any] = {
        "model": lowered.model,
        "target": lowered.target.name,
        "seconds": lowered.seconds,
        "passes": lowered.passes,
        "cpu_ops": lowered.cpu_ops,
        "warnings": lowered.warnings,
        "verification": lowered.verification,
        "report": lowered.report,
    }
    blobs = {"pte": lowered.pte, **{_EXTRA + name: data for name, data in lowered.extras.items()}}
    return Entry(key=key, summary=summary, blobs=blobs)


def _from_entry(entry: Entry, model: str, options: LowerOptions, steps: Steps) -> Lowered:
    summary = entry.summary
    lowered = Lowered(model=model, target=options.target, pte=entry.blobs["pte"], seconds=steps.seconds)
    lowered.passes = list(summary.get("passes", []))
    lowered.cpu_ops = list(summary.get("cpu_ops", []))
    lowered.warnings = list(summary.get("warnings", []))
    lowered.verification = dict(summary.get("verification", {}))
    lowered.report = dict(summary.get("report", {}))
    lowered.extras = {name.removeprefix(_EXTRA): data for name, data in entry.blobs.items() if name.startswith(_EXTRA)}
    lowered.cache = "hit"
    return lowered
