"""Memory sizes on the command line: `512KiB`, `512K`, `1.5MiB`, `2M`, or plain bytes."""

from __future__ import annotations

import re

from lowerkit.cli.errors import UsageError

_UNITS = {"": 1, "b": 1, "k": 1024, "kb": 1024, "kib": 1024, "m": 1024**2, "mb": 1024**2, "mib": 1024**2}
_SIZE = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*([a-zA-Z]*)\s*$")


def parse_size(text: str, option: str) -> int:
    """Bytes in `text` (binary units: K = KiB = 1024); UsageError naming `option` otherwise."""
    match = _SIZE.match(text)
    unit = match.group(2).lower() if match else None
    if match is None or unit not in _UNITS:
        raise UsageError(f"{option} '{text}' is not a size; write e.g. 512KiB, 2MiB or 65536 (bytes)")
    return int(float(match.group(1)) * _UNITS[unit])
