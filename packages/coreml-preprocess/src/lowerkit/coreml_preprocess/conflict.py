"""One Core ML backend per process: lowerkit's and ExecuTorch's ``CoreMLBackend`` cannot coexist.

ExecuTorch finds a backend by class name among ``BackendDetails.__subclasses__()``:
``to_backend`` takes the first class named ``CoreMLBackend`` it meets, the multi-method path
(``to_edge_transform_and_lower``) builds a dict and so takes the last. With both classes loaded,
which one lowers a program would depend on import order and on the API used, silently. So:

* importing lowerkit's backend when ExecuTorch's is loaded raises ``CoreMLBackendConflictError``;
* while a lowerkit Core ML step runs (``scope.coreml_scope``), importing ExecuTorch's Core ML
  ``compiler`` / ``partition`` / ``recipes`` modules raises it too (a finder on
  ``sys.meta_path``, present only meanwhile, refuses that one module);
* the partitioner (built and run) and preprocess check, so ExecuTorch's backend imported
  after lowerkit's, outside a step, is refused at the next use.
"""

from __future__ import annotations

import importlib.abc
import importlib.machinery
import sys
from collections.abc import Sequence
from types import ModuleType

from lowerkit.coreml_preprocess import _upstream
from lowerkit.coreml_preprocess.errors import CoreMLBackendConflictError

BACKEND_ID = "CoreMLBackend"

_ADVICE = (
    "ExecuTorch looks backends up by class name, so with both loaded it would pick one "
    "silently. Use one Core ML backend per process: lowerkit's "
    "(lowerkit.coreml_preprocess.CoreMLBackend / CoreMLPartitioner) or ExecuTorch's "
    "(executorch.backends.apple.coreml); run the other in a subprocess."
)


def other_backends(ours: type | None) -> list[type]:
    """``BackendDetails`` subclasses named ``CoreMLBackend`` other than ``ours``."""
    base = _upstream.backend_details_class()
    subclasses: list[type] = base.__subclasses__()
    return [c for c in subclasses if c.__name__ == BACKEND_ID and c is not ours]


def ensure_sole_backend(ours: type | None) -> None:
    """Raise ``CoreMLBackendConflictError`` if another ``CoreMLBackend`` is registered."""
    others = other_backends(ours)
    if others:
        where = ", ".join(f"{c.__module__}.{c.__qualname__}" for c in others)
        raise CoreMLBackendConflictError(
            f"another Core ML backend with id '{BACKEND_ID}' is loaded ({where}) besides "
            f"lowerkit's. {_ADVICE}"
        )


class _RefuseExecuTorchCoreMLBackend(importlib.abc.MetaPathFinder):
    """Refuses to import ExecuTorch's ``coreml_preprocess`` once lowerkit's backend is loaded."""

    def find_spec(
        self,
        fullname: str,
        path: Sequence[str] | None = None,
        target: ModuleType | None = None,
    ) -> importlib.machinery.ModuleSpec | None:
        if fullname == _upstream.EXECUTORCH_COREML_PREPROCESS_MODULE:
            raise CoreMLBackendConflictError(
                f"cannot import {fullname}: lowerkit.coreml_preprocess's CoreMLBackend (backend id "
                f"'{BACKEND_ID}') is already loaded in this process. {_ADVICE}"
            )
        return None


_GUARD = _RefuseExecuTorchCoreMLBackend()


def install_import_guard() -> None:
    """Put the refusing finder first on ``sys.meta_path`` (once)."""
    if _GUARD not in sys.meta_path:
        sys.meta_path.insert(0, _GUARD)


def remove_import_guard() -> None:
    """Take the refusing finder off ``sys.meta_path``."""
    while _GUARD in sys.meta_path:
        sys.meta_path.remove(_GUARD)


def check_executorch_not_loaded() -> None:
    """Raise if ExecuTorch's Core ML backend module is already imported."""
    if _upstream.EXECUTORCH_COREML_PREPROCESS_MODULE in sys.modules or other_backends(None):
        raise CoreMLBackendConflictError(
            "cannot load lowerkit.coreml_preprocess's CoreMLBackend: ExecuTorch's Core ML backend "
            f"({_upstream.EXECUTORCH_COREML_PREPROCESS_MODULE}) is already loaded in this process. "
            + _ADVICE
        )
