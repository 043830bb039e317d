"""A lowering through the cache: key it, serve a verified entry, or lower and store the result."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from lowerkit.cli import calibration
from lowerkit.cli.cache.entry import CorruptEntry, Entry
from lowerkit.cli.cache.remote import RemoteStore
from lowerkit.cli.cache.store import LocalStore
from lowerkit.cli.model_source import ModelSource
from lowerkit.cli.options import LowerOptions
from lowerkit.cli.progress import Steps
from lowerkit.cli.result import Lowered

_TOSA = "tosa/"


@dataclass
class CacheSettings:
    """Where lowerings are cached: off, a local store, and optionally a remote one."""

    enabled: bool = True
    local: LocalStore = field(default_factory=LocalStore)
    remote: RemoteStore | None = None


def lower(source: ModelSource, options: LowerOptions, *, steps: Steps, cache: CacheSettings) -> Lowered:
    """`lowering.lower` through the cache; `Lowered.cache` says hit, miss or off."""
    from lowerkit.cli import lowering

    if not cache.enabled:
        lowered = lowering.lower(source, options, steps=steps)
        lowered.cache = "off"
        return lowered
    from lowerkit.cli.cache.key import lowering_key

    with steps.step("cache key"):
        batches = calibration.load(options.calibration_path, source, warn=[]) if options.target.calibrates else []
        key = lowering_key(source, options, batches)
    with steps.step("cache lookup"):
        entry = _lookup(key, cache)
    if entry is not None:
        return _from_entry(entry, source, options, steps)
    lowered = lowering.lower(source, options, steps=steps)
    lowered.cache = "miss"
    entry = _to_entry(key, lowered)
    data = entry.encode()
    cache.local.put_bytes(key, data)
    if cache.remote is not None:
        cache.remote.put(key, data)
    return lowered


def _lookup(key: str, cache: CacheSettings) -> Entry | None:
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
    }
    blobs = {"pte": lowered.pte, **{_TOSA + name: data for name, data in lowered.tosa.items()}}
    return Entry(key=key, summary=summary, blobs=blobs)


def _from_entry(entry: Entry, source: ModelSource, options: LowerOptions, steps: Steps) -> Lowered:
    summary = entry.summary
    lowered = Lowered(model=source.name, target=options.target, pte=entry.blobs["pte"], seconds=steps.seconds)
    lowered.tosa = {name.removeprefix(_TOSA): data for name, data in entry.blobs.items() if name.startswith(_TOSA)}
    lowered.passes = list(summary.get("passes", []))
    lowered.cpu_ops = list(summary.get("cpu_ops", []))
    lowered.warnings = list(summary.get("warnings", []))
    lowered.verification = dict(summary.get("verification", {}))
    lowered.cache = "hit"
    return lowered
