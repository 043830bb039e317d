"""Hand the ``MLModel`` that preprocess converted to the caller that asked for it (lower_to_coreml).

``CoreMLBackend.preprocess`` is called by ExecuTorch, deep inside ``to_backend``, and returns
only bytes. Inside ``capturing_models()`` each converted model is also appended to the list
it yields, with its conversion date settled as in the payload (so its spec is the payload's).
Context-local: other threads and callers outside the block capture nothing.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from typing import Any

from lowerkit.coreml_preprocess.package import settle_conversion_date

__all__ = ["capturing_models", "record"]

_CAPTURED: ContextVar[list[Any] | None] = ContextVar("lowerkit_coreml_captured", default=None)


@contextmanager
def capturing_models() -> Iterator[list[Any]]:
    """Collect the MLModels preprocess converts in this block, in lowering order."""
    models: list[Any] = []
    token = _CAPTURED.set(models)
    try:
        yield models
    finally:
        _CAPTURED.reset(token)


def record(mlmodel: Any) -> None:
    """Called by preprocess once the payload is built: keep `mlmodel` if someone is capturing."""
    models = _CAPTURED.get()
    if models is not None:
        settle_conversion_date(mlmodel.user_defined_metadata)
        models.append(mlmodel)
