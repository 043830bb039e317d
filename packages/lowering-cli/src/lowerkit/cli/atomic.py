"""Output checks and folder writes, so that a reader never sees a half-written folder.

Files are written with pass-infra's `write_bytes_atomically`.
"""

from __future__ import annotations

import os
import shutil
import tempfile
from collections.abc import Callable
from pathlib import Path

from lowerkit.cli.errors import UsageError


def check_writable(path: Path) -> None:
    """Fail early, before any lowering work, when `path` cannot be written."""
    parent = path.parent if str(path.parent) else Path(".")
    if path.is_dir():
        raise UsageError(f"output path '{path}' is a directory; give a file name such as '{path / 'model.pte'}'")
    if not parent.is_dir():
        raise UsageError(f"cannot write '{path}': folder '{parent}' does not exist (create it first)")
    try:  # A real probe: permission bits say nothing for root, or on read-only file systems.
        descriptor, probe = tempfile.mkstemp(dir=parent, prefix=f".{path.name}.", suffix=".probe")
    except OSError as error:
        raise UsageError(f"cannot write '{path}': {error.strerror or error}") from None
    os.close(descriptor)
    os.unlink(probe)
    if path.exists() and not os.access(path, os.W_OK):
        raise UsageError(f"cannot write '{path}': the file exists and is read-only")


def write_directory(path: Path, fill: Callable[[Path], None]) -> None:
    """Build a folder with `fill(tmp)` and move it to `path` in one rename, replacing any old one."""
    path.parent.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp"))
    try:
        fill(staging)
        if path.exists():
            retired = Path(tempfile.mkdtemp(dir=path.parent, prefix=f".{path.name}.", suffix=".old"))
            os.replace(path, retired / path.name)
            os.replace(staging, path)
            shutil.rmtree(retired, ignore_errors=True)
        else:
            os.replace(staging, path)
    except BaseException:
        shutil.rmtree(staging, ignore_errors=True)
        raise
