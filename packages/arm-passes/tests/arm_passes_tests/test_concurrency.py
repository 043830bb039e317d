"""lower_to_arm from several threads: sequential results, byte for byte; ExecuTorch left stock."""

from __future__ import annotations

import os
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from executorch.backends.arm import _passes
from executorch.backends.arm.tosa.backend import TOSABackend

from lowerkit.arm_passes import PROVEN_ON, lower_to_arm
from lowerkit.pass_infra._upstream import replay_state_snapshot
from lowerkit.pass_infra.accelerations.versions import unproven_differences


def test_proven_on_the_installed_versions() -> None:
    assert unproven_differences(PROVEN_ON) == {}


def test_threads_lower_to_the_sequential_bytes(permute_net: Any) -> None:
    model, example, _ = permute_net
    manager, preprocess = _passes.ArmPassManager, TOSABackend.__dict__["_preprocess"]
    replay = replay_state_snapshot()
    expected = lower_to_arm(model, example, "TOSA-1.0+FP")

    def work(i: int) -> Any:
        return lower_to_arm(model, example, "TOSA-1.0+FP", stock=(i == 2))

    with ThreadPoolExecutor(max_workers=3) as pool:  # a thread's error is raised here
        results = list(pool.map(work, range(3)))
    for result in results:
        assert result.pte == expected.pte and result.tosa_flatbuffers == expected.tosa_flatbuffers
    assert _passes.ArmPassManager is manager
    assert TOSABackend.__dict__["_preprocess"] is preprocess
    after = replay_state_snapshot()
    assert all(after[k] is replay[k] for k in replay if k != "current_meta")


_IMPORT_CHECK = """
import sys
from executorch.backends.arm import _passes
from executorch.backends.arm.tosa.backend import TOSABackend
def state():
    return [_passes.ArmPassManager, TOSABackend.__dict__["_preprocess"], list(sys.meta_path)]
before = state()
import lowerkit.arm_passes
after = state()
assert all(a is b or a == b for a, b in zip(before, after)), (before, after)
print("unchanged")
"""


def test_importing_the_package_patches_nothing() -> None:
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(p for p in sys.path if p)}
    done = subprocess.run([sys.executable, "-c", _IMPORT_CHECK], capture_output=True, text=True, env=env)
    assert done.returncode == 0 and "unchanged" in done.stdout, done.stderr[-3000:]
