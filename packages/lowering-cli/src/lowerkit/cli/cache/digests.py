"""Tagged SHA-256 digests, and the digests of files and folders by content (remembered per process)."""

from __future__ import annotations

import hashlib
from functools import cache
from pathlib import Path

__all__ = ["Digest", "file_digest", "path_digest"]


class Digest:
    """A SHA-256 fed with tagged, length-prefixed fields (no two inputs collide by concatenation)."""

    def __init__(self) -> None:
        self._hash = hashlib.sha256()

    def add(self, tag: str, data: bytes | str) -> None:
        raw = data.encode() if isinstance(data, str) else data
        self._hash.update(f"{tag}:{len(raw)}:".encode())
        self._hash.update(raw)

    def hexdigest(self) -> str:
        return self._hash.hexdigest()


def path_digest(path: Path) -> str:
    """The SHA-256 of a file's bytes, or of a folder's relative names and file bytes; 'missing' if absent."""
    if path.is_file():
        return hashlib.sha256(path.read_bytes()).hexdigest()
    if path.is_dir():
        digest = Digest()
        for item in sorted(p for p in path.rglob("*") if p.is_file()):
            digest.add("name", item.relative_to(path).as_posix())
            digest.add("bytes", hashlib.sha256(item.read_bytes()).hexdigest())
        return "dir:" + digest.hexdigest()
    return "missing"


def file_digest(path: Path) -> str:
    """`path_digest` of a file, remembered in this process while its size and modification time stay the same."""
    return _binary_digest(path)


def _binary_digest(path: Path) -> str:
    """`path_digest` of a binary, remembered while its size and modification time stay the same."""
    try:
        resolved = path.resolve()
        stat = resolved.stat()
    except OSError:
        return "missing"
    return _stamped_digest(str(resolved), stat.st_size, stat.st_mtime_ns)


@cache
def _stamped_digest(path: str, size: int, mtime_ns: int) -> str:
    return path_digest(Path(path))
