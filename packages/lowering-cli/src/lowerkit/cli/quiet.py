"""Third-party noise off: done first in every process that runs a command (console, daemon, fleet worker)."""

from __future__ import annotations

import logging
import os
import warnings


def quiet_libraries() -> None:
    """Silence the logs, warnings and progress bars of torch, ExecuTorch and coremltools.

    Must run before those libraries are imported: tqdm reads its environment at import.
    Set LOWERKIT_DEBUG=1 to keep them.
    """
    if os.environ.get("LOWERKIT_DEBUG"):
        return
    os.environ.setdefault("TQDM_DISABLE", "1")
    logging.disable(logging.WARNING)
    warnings.simplefilter("ignore")
