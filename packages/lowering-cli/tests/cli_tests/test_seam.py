"""The backend seam holds: a backend registered from outside gets its flags, its FLEET.toml key and its settings.

`FAKE` below is a backend no CLI module names. Registered before the app is imported (as a
plug-in would be), its `--fake-level` shows on `lowerkit lower --help`, `lower` delivers the
checked value to its `lower`, and FLEET.toml takes it as `fake_level`.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from lowerkit.cli.backend import Backend, DebugRequest, TargetOption
from lowerkit.cli.errors import UsageError
from lowerkit.cli.options import LowerOptions, Target
from lowerkit.cli.progress import Steps
from lowerkit.cli.result import Lowered


@dataclass(frozen=True)
class FakeSettings:
    """The fake backend's one setting."""

    level: int = 0


def _level(target: Target, text: str) -> int:
    if not text.isdigit():
        raise UsageError(f"--fake-level '{text}' is not a number; give e.g. --fake-level 3")
    return int(text)


class FakeBackend(Backend):
    """Writes its settings as the program, so that a test can read what it was given."""

    family = "fake"
    title = "Fake"
    preload = ()
    verification_figures = ()
    targets = (Target("fake-target", "fake", "a backend registered by a test"),)
    options = (
        TargetOption(
            "--fake-level", "fake targets", lambda target: target.backend == "fake", help="Fake: how hard to try.",
            field="level", convert=_level, fleet=True,
        ),
    )
    settings_type = FakeSettings

    def lower(self, source: Any, options: LowerOptions, *, calibration: list[Any], steps: Steps) -> Lowered:
        """The settings it was given, as the program's bytes."""
        settings: FakeSettings = self.settings_of(options)
        lowered = Lowered(model=source.name, target=options.target, pte=json.dumps({"level": settings.level}).encode())
        lowered.report["fake"] = {"level": settings.level}
        return lowered

    def verify(self, lowered: Lowered, source: Any) -> dict[str, Any]:
        """Nothing to check."""
        return {}

    def debuggable(self, target: Target) -> bool:
        """Nothing to debug."""
        return False

    def debug(self, source: Any, target: Target, request: DebugRequest) -> Any:
        """Never asked."""
        raise AssertionError("not debuggable")


FAKE = FakeBackend()

#: Registers FAKE, then runs the CLI with argv[1:].
_RUN = """
import sys
from lowerkit.cli import targets
from cli_tests.test_seam import FAKE
targets.register(FAKE)
from lowerkit.cli.entry import run
run(sys.argv[1:])
"""


def _lowerkit(folder: Path, *args: str) -> subprocess.CompletedProcess[str]:
    path = os.pathsep.join(os.path.abspath(p) for p in sys.path if p)
    env = {**os.environ, "PYTHONPATH": path, "LOWERKIT_CACHE_DIR": str(folder / "cache")}
    return subprocess.run([sys.executable, "-c", _RUN, *args], env=env, capture_output=True, text=True, timeout=300)


def test_a_registered_backend_gets_its_flag_its_fleet_key_and_its_settings(tmp_path: Path) -> None:
    help_text = _lowerkit(tmp_path, "lower", "--help")
    assert help_text.returncode == 0, help_text.stderr
    assert "--fake-level TEXT" in help_text.stdout and "Fake: how hard to try." in help_text.stdout

    out = tmp_path / "m.pte"
    lowered = _lowerkit(tmp_path, "lower", "zoo:conv_linear", "-t", "fake-target", "-o", str(out), "--fake-level", "3", "-q", "--json")
    assert lowered.returncode == 0, lowered.stderr
    assert json.loads(out.read_bytes()) == {"level": 3}
    assert json.loads(lowered.stdout)["fake"] == {"level": 3}

    refused = _lowerkit(tmp_path, "lower", "zoo:conv_linear", "-t", "tosa-fp", "-o", str(out), "--fake-level", "3")
    assert refused.returncode == 2 and "--fake-level applies to fake targets, not 'tosa-fp'" in refused.stderr
    wrong = _lowerkit(tmp_path, "lower", "zoo:conv_linear", "-t", "fake-target", "-o", str(out), "--fake-level", "x")
    assert wrong.returncode == 2 and "--fake-level 'x' is not a number" in wrong.stderr

    fleet = tmp_path / "FLEET.toml"
    fleet.write_text('[[lower]]\nmodel = "zoo:conv_linear"\ntargets = ["fake-target"]\nfake_level = "5"\n')
    built = _lowerkit(tmp_path, "build", str(fleet), "-o", str(tmp_path / "out"), "-q")
    assert built.returncode == 0, built.stderr
    assert json.loads((tmp_path / "out" / "conv_linear.fake-target.pte").read_bytes()) == {"level": 5}
