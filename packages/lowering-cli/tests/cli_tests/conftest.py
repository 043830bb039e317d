from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import pytest

from lowerkit.cli import run


@dataclass
class Outcome:
    code: int
    out: str
    err: str


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
