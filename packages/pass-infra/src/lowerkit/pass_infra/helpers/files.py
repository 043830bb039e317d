"""write_bytes_atomically: the one atomic file writer of lowerkit (no torch import)."""

from __future__ import annotations

import os
import tempfile
from pathlib import Path

__all__ = ["write_bytes_atomically"]


def write_bytes_atomically(path: str | os.PathLike[str], data: bytes) -> Path:
    """Write `data` to `path` through a temporary file in the same folder and one rename.

    A reader never sees a half-written file; on any error the temporary file is removed and
    an existing file at `path` is left as it was. Returns the path.
    """
    target = Path(path)
    descriptor, temporary = tempfile.mkstemp(dir=target.parent, prefix=f".{target.name}.", suffix=".tmp")
    try:
        with os.fdopen(descriptor, "wb") as out:
            out.write(data)
            out.flush()
            os.fsync(out.fileno())
        os.chmod(temporary, 0o644)
        os.replace(temporary, target)
    except BaseException:
        Path(temporary).unlink(missing_ok=True)
        raise
    return target
