"""coreml_scope(): what every Core ML lowering step of this package holds, and only meanwhile.

* the process-wide lowering lock (``lowerkit.pass_infra.lowering_lock``): torch, ExecuTorch
  and coremltools' converter cannot lower in several threads at once;
* lowerkit's op translations in coremltools' registry (``lowerkit.coreml_compiler_ops.register``),
  unless someone had registered them already; removed again by the last scope out;
* the import guard refusing ExecuTorch's own Core ML backend (see `conflict`).

Importing the package changes nothing in coremltools, ExecuTorch or ``sys.meta_path``. The
translations are registry data, not functions, so while a scope is open other threads'
``ct.convert`` calls see them too (they hold no lowerkit lock); the translations give the
same MIL as ExecuTorch's for every op both cover.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

from lowerkit.coreml_preprocess import conflict
from lowerkit.pass_infra.accelerations.patching import Patch, lowering_lock

__all__ = ["COREML_SCOPE", "coreml_scope"]

_state = {"registered_by_us": False}


def _install() -> None:
    from lowerkit.coreml_compiler_ops.registry import is_registered, register

    if not is_registered():
        register()
        _state["registered_by_us"] = True
    conflict.install_import_guard()


def _uninstall() -> None:
    from lowerkit.coreml_compiler_ops.registry import unregister

    try:
        conflict.remove_import_guard()
    finally:
        if _state["registered_by_us"]:
            _state["registered_by_us"] = False
            unregister()


#: Holds the translations and the import guard while any Core ML lowering step runs.
COREML_SCOPE = Patch("lowerkit.coreml_preprocess.scope", [], on_install=[_install], on_uninstall=[_uninstall])


@contextmanager
def coreml_scope() -> Iterator[None]:
    """Hold the lowering lock, lowerkit's translations and the import guard for the block."""
    with lowering_lock(), COREML_SCOPE.scope():
        yield
