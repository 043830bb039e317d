"""The console entry point: quiets third-party noise before anything heavy is imported."""

from __future__ import annotations

import logging
import os
import sys
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


def run(argv: list[str] | None = None) -> None:
    """Run `lowerkit` with `argv` (default: the command line) and exit with its status.

    A command line (`argv` None) is handed to a running `lowerkit daemon` when one matches this
    interpreter (see `lowerkit.cli.daemon`); an explicit `argv` always runs in this process.
    """
    quiet_libraries()
    if argv is None:
        from lowerkit.cli.daemon import forward_if_running

        status = forward_if_running(sys.argv[1:])
        if status is not None:
            sys.exit(status)
    from lowerkit.cli.app import run_app

    run_app(argv)
