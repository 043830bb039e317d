"""The local cache: one file per key under a folder, written atomically, LRU-bounded in size.

A hit refreshes the entry's modification time; after each write the least recently used
entries are removed until the folder is under its bound. Readers and writers need no lock: an
entry appears by one rename, two writers of one key both succeed (the last rename wins, with the
same bytes), and an entry that fails its digests is removed and reported as a miss.
"""

from __future__ import annotations

import contextlib
import os
from dataclasses import dataclass
from pathlib import Path

from lowerkit.cli.cache.entry import CorruptEntry, Entry
from lowerkit.pass_infra.helpers.files import write_bytes_atomically

#: The default size bound of the local cache (LOWERKIT_CACHE_MAX_BYTES overrides it).
DEFAULT_MAX_BYTES = 2 * 1024**3


def default_directory() -> Path:
    """LOWERKIT_CACHE_DIR, else $XDG_CACHE_HOME/lowerkit, else ~/.cache/lowerkit."""
    explicit = os.environ.get("LOWERKIT_CACHE_DIR")
    if explicit:
        return Path(explicit)
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "lowerkit"


def default_max_bytes() -> int:
    """LOWERKIT_CACHE_MAX_BYTES (bytes), else DEFAULT_MAX_BYTES."""
    value = os.environ.get("LOWERKIT_CACHE_MAX_BYTES", "")
    return int(value) if value.isdigit() else DEFAULT_MAX_BYTES


@dataclass(frozen=True)
class StoreInfo:
    """What `lowerkit cache info` prints."""

    directory: Path
    entries: int
    bytes: int
    max_bytes: int


class LocalStore:
    """Entries by key in `directory`, at most `max_bytes` in total."""

    def __init__(self, directory: Path | None = None, *, max_bytes: int | None = None) -> None:
        self.directory = directory if directory is not None else default_directory()
        self.max_bytes = max_bytes if max_bytes is not None else default_max_bytes()
        self._entries = self.directory / "entries"

    def path(self, key: str) -> Path:
        """Where the entry for `key` lives."""
        return self._entries / key[:2] / key

    def get(self, key: str) -> Entry | None:
        """The verified entry for `key`, or None (a corrupt entry is removed)."""
        path = self.path(key)
        try:
            data = path.read_bytes()
        except OSError:  # absent, or unreadable: a miss
            return None
        try:
            entry = Entry.decode(data, key=key)
        except CorruptEntry:
            path.unlink(missing_ok=True)
            return None
        with contextlib.suppress(OSError):
            os.utime(path)  # least recently used = oldest modification time
        return entry

    def put(self, entry: Entry) -> None:
        """Store `entry` atomically, then evict least recently used entries beyond the bound."""
        self.put_bytes(entry.key, entry.encode())

    def put_bytes(self, key: str, data: bytes) -> None:
        """Store an encoded entry (already verified by the caller) atomically, then evict."""
        path = self.path(key)
        path.parent.mkdir(parents=True, exist_ok=True)
        write_bytes_atomically(path, data)
        self.evict(keep=path)

    def evict(self, *, keep: Path | None = None) -> list[Path]:
        """Remove least recently used entries until the total is within `max_bytes`; returns them."""
        files = self._files()
        total = sum(size for _, size, _ in files)
        removed: list[Path] = []
        for path, size, _ in sorted(files, key=lambda item: (item[2], item[0].name)):
            if total <= self.max_bytes:
                break
            if path == keep:
                continue
            with contextlib.suppress(FileNotFoundError):
                path.unlink()
                removed.append(path)
            total -= size
        return removed

    def info(self) -> StoreInfo:
        """The folder, number of entries and total bytes."""
        files = self._files()
        return StoreInfo(self.directory, len(files), sum(size for _, size, _ in files), self.max_bytes)

    def clear(self) -> int:
        """Remove every entry; returns how many there were."""
        files = self._files()
        for path, _, _ in files:
            path.unlink(missing_ok=True)
        return len(files)

    def _files(self) -> list[tuple[Path, int, float]]:
        rows: list[tuple[Path, int, float]] = []
        if not self._entries.is_dir():
            return rows
        for shard in self._entries.iterdir():
            for path in shard.iterdir() if shard.is_dir() else ():
                if path.name.startswith("."):
                    continue  # a writer's temporary file
                try:
                    stat = path.stat()
                except FileNotFoundError:
                    continue
                rows.append((path, stat.st_size, stat.st_mtime))
        return rows

