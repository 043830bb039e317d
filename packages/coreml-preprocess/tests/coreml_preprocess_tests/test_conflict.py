"""lowerkit's and ExecuTorch's Core ML backends in one process fail clearly, in either order."""

from __future__ import annotations

import gc
import importlib
import os
import subprocess
import sys

import pytest
from executorch.exir.backend.backend_details import BackendDetails

from lowerkit.coreml_preprocess import (
    CoreMLBackend,
    CoreMLBackendConflictError,
    CoreMLPartitioner,
    conflict,
    coreml_scope,
)


def test_importing_executorchs_backend_during_a_lowering_step_fails():
    with coreml_scope():
        for name in ("executorch.backends.apple.coreml.compiler", "executorch.backends.apple.coreml.partition"):
            with pytest.raises(CoreMLBackendConflictError, match="already loaded"):
                importlib.import_module(name)
            assert name not in sys.modules
    assert not any(type(f).__module__ == conflict.__name__ for f in sys.meta_path)
    assert [c for c in BackendDetails.__subclasses__() if c.__name__ == "CoreMLBackend"] == [CoreMLBackend]


def _error_printed(first: str, then: str, error: str) -> str:
    """Run `first`, then `then`, in a fresh interpreter: what it prints of the `error` `then` raises."""
    code = f"{first}\ntry:\n    {then}\nexcept {error} as error:\n    print(type(error).__name__, error)\n"
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(p for p in sys.path if p)}
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, env=env)
    return done.stdout


def test_executorchs_backend_imported_after_ours_is_refused_at_use():
    first = "import lowerkit.coreml_preprocess as ours\nimport executorch.backends.apple.coreml.compiler"
    out = _error_printed(first, "ours.CoreMLPartitioner()", "ours.CoreMLBackendConflictError")
    assert "CoreMLBackendConflictError another Core ML backend" in out


def test_a_second_backend_class_is_refused_at_use():
    namespace: dict[str, object] = {}
    exec("class CoreMLBackend(BackendDetails):\n    pass\n", {"BackendDetails": BackendDetails}, namespace)
    try:
        with pytest.raises(CoreMLBackendConflictError, match="another Core ML backend"):
            CoreMLPartitioner()
        with pytest.raises(CoreMLBackendConflictError):
            CoreMLBackend.preprocess(None, [])
    finally:
        namespace.clear()
        gc.collect()
    conflict.ensure_sole_backend(CoreMLBackend)


def test_importing_ours_after_executorchs_fails():
    out = _error_printed("import executorch.backends.apple.coreml.compiler", "import lowerkit.coreml_preprocess", "ImportError")
    assert "CoreMLBackendConflictError" in out
    assert "ExecuTorch's Core ML backend" in out
