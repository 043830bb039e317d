from __future__ import annotations

import os
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
    previous = os.environ.get("LOWERKIT_CACHE_DIR")
    os.environ["LOWERKIT_CACHE_DIR"] = str(tmp_path_factory.mktemp("lowerkit-cache"))
    yield
    if previous is None:
        os.environ.pop("LOWERKIT_CACHE_DIR", None)
    else:
        os.environ["LOWERKIT_CACHE_DIR"] = previous


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
