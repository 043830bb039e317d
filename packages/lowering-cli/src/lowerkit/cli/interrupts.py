"""Ctrl-C that Python would swallow: a KeyboardInterrupt raised inside a finalizer or a weakref
callback is printed as "Exception ignored" and lost, and the lowering would go on and write its
output. `redeliver_swallowed_interrupts` sends such an interrupt again, so it lands in the
command's own code, which stops and writes nothing."""

from __future__ import annotations

import os
import signal
import sys
import threading
from typing import Any

__all__ = ["redeliver_swallowed_interrupts"]


def redeliver_swallowed_interrupts() -> None:
    """From now on, a KeyboardInterrupt that Python could not raise is raised again (SIGINT to self)."""
    previous = sys.unraisablehook
    if getattr(previous, "redelivers_interrupts", False):
        return

    def hook(unraisable: Any) -> None:
        if isinstance(unraisable.exc_value, KeyboardInterrupt):
            # A moment later, from another thread, so that the main thread handles it after this
            # callback, not in it (a signal sent to itself now is handled, and swallowed, right here);
            # one swallowed again comes back to this hook.
            timer = threading.Timer(0.01, os.kill, args=(os.getpid(), signal.SIGINT))
            timer.daemon = True
            timer.start()
            return
        previous(unraisable)

    hook.redelivers_interrupts = True  # type: ignore[attr-defined]
    sys.unraisablehook = hook
