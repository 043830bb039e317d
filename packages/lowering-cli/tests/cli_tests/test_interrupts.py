"""A Ctrl-C raised where Python swallows it (a weakref callback) still stops the command."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

#: A KeyboardInterrupt raised in a weakref callback, then a loop a lowering would be: 2 s
#: stock (the interrupt is lost), up to 60 s when it is sent again (it arrives within
#: milliseconds on an idle machine, later on a loaded one: the test waits, it does not time it).
_PROGRAM = """
import sys, time, weakref
if sys.argv[1] == "redeliver":
    from lowerkit.cli.interrupts import redeliver_swallowed_interrupts
    redeliver_swallowed_interrupts()
class Held: pass
held = Held()
def callback(_):
    raise KeyboardInterrupt
ref = weakref.ref(held, callback)
deadline = time.monotonic() + (2 if sys.argv[1] == "stock" else 60)
try:
    del held
    while time.monotonic() < deadline:
        time.sleep(0.001)
    print("went on")
except KeyboardInterrupt:
    print("interrupted")
"""


@pytest.mark.parametrize(("mode", "expected"), [("stock", "went on"), ("redeliver", "interrupted")])
def test_an_interrupt_swallowed_by_a_callback_is_raised_again(mode: str, expected: str) -> None:
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(p for p in sys.path if p)}
    done = subprocess.run([sys.executable, "-c", _PROGRAM, mode], env=env, capture_output=True, text=True, timeout=120, check=True)
    assert done.stdout.strip() == expected
    assert ("Exception ignored" in done.stderr) == (mode == "stock")
