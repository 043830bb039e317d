"""The console entry point: quiets third-party noise, hands the command to a daemon or runs it here."""

from __future__ import annotations

import sys

from lowerkit.cli.quiet import quiet_libraries


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
