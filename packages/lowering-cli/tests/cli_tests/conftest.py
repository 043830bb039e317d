from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from lowerkit.cli import run


@dataclass
class Outcome:
    code: int
    out: str
    err: str


@pytest.fixture(scope="session", autouse=True)
def _session_cache_dir(tmp_path_factory: pytest.TempPathFactory) -> Iterator[None]:
    """Keep the lowering cache of every test (and its subprocesses) out of the user's cache."""
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("LOWERKIT_CACHE_DIR", str(tmp_path_factory.mktemp("lowerkit-cache")))
        yield


@pytest.fixture(autouse=True)
def cache_dir(tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A fresh, empty lowering cache for each test (LOWERKIT_CACHE_DIR)."""
    folder = tmp_path_factory.mktemp("cache")
    monkeypatch.setenv("LOWERKIT_CACHE_DIR", str(folder))
    return folder


@pytest.fixture
def lowerkit(capsys: pytest.CaptureFixture[str]) -> Callable[..., Outcome]:
    """Run the CLI in-process: lowerkit("lower", "zoo:x", ...) -> Outcome."""

    def invoke(*args: str) -> Outcome:
        capsys.readouterr()
        with pytest.raises(SystemExit) as exit_info:
            run(list(args))
        captured = capsys.readouterr()
        code = exit_info.value.code
        return Outcome(code if isinstance(code, int) else 1, captured.out, captured.err)

    return invoke


def _define_torchvision_nms_schemas() -> object:
    """TEST-HARNESS WORKAROUND, not shipped: let a torchvision whose compiled ops cannot load import.

    On the CI machines torchvision (PyPI wheel) links its `_C` ops against a CUDA torch while
    the installed torch is a +cpu build, so `import torchvision` (and transformers' model classes,
    which import it) fails with "operator torchvision::nms does not exist": the import registers
    fake kernels for `torchvision::nms` / `qnms` unconditionally. Defining those two schemas
    (no kernels) lets the Python package import; the models lowerkit's tests build (torchvision
    classifiers, tiny Hugging Face models) never call the detection ops. The shipped CLI reports
    the failure instead (`lowerkit.cli.sources.tv`), as tested in test_sources.py.
    Returns the torch.library.Library holding the schemas (it must stay alive).
    """
    import torch

    library = torch.library.Library("torchvision", "FRAGMENT")
    for name in ("nms", "qnms"):
        library.define(f"{name}(Tensor dets, Tensor scores, float iou_threshold) -> Tensor")
    return library


@pytest.fixture(scope="session")
def importable_torchvision() -> Iterator[None]:
    """torchvision (and transformers' models) importable in this process: as installed, or with the
    test-harness schemas above when its compiled ops cannot load (see `_define_torchvision_nms_schemas`)."""
    import importlib
    import sys

    try:
        importlib.import_module("torchvision")
        yield
        return
    except RuntimeError as error:
        if "torchvision::" not in str(error):
            raise
    for name in [n for n in sys.modules if n == "torchvision" or n.startswith("torchvision.")]:
        del sys.modules[name]
    library = _define_torchvision_nms_schemas()
    importlib.import_module("torchvision")
    yield
    del library
