"""The one place this package reaches into third-party private names."""

from __future__ import annotations

from typing import Any


def deserialize_pte(data: bytes) -> Any:
    """ExecuTorch's own .pte reader: a PTEFile whose `.program` is an `exir.schema.Program`.

    `lowerkit inspect` reads .pte files with `pte_file` (no torch import); the tests check
    that reader against this one.
    """
    from executorch.exir._serialize._program import deserialize_pte_binary

    return deserialize_pte_binary(data)
