"""The console entry point: pins the hash seed, quiets third-party noise, hands the command to a
daemon or runs it here."""

from __future__ import annotations

import os
import sys

from lowerkit.cli.interrupts import redeliver_swallowed_interrupts
from lowerkit.cli.quiet import quiet_libraries

#: Python's string-hash seed every command line runs with. Stock ExecuTorch's Arm lowering iterates
#: strings in hash order somewhere, so its `.pte` (and lowerkit's, which gives stock's bytes) can
#: depend on the seed (docs/benchmarks.md): one seed, so the same input gives the same bytes.
HASH_SEED = "0"


def pin_hash_seed() -> None:
    """Re-run this command line under ``PYTHONHASHSEED=HASH_SEED`` unless it already runs so.

    The seed is fixed when the interpreter starts, so the only way is to start again: the same
    interpreter and arguments (`sys.orig_argv`), before anything heavy is imported.
    """
    if os.environ.get("PYTHONHASHSEED") == HASH_SEED or not sys.executable or not sys.orig_argv:
        return
    os.environ["PYTHONHASHSEED"] = HASH_SEED
    sys.stdout.flush()
    sys.stderr.flush()
    os.execv(sys.executable, sys.orig_argv)


def run(argv: list[str] | None = None) -> None:
    """Run `lowerkit` with `argv` (default: the command line) and exit with its status.

    A command line (`argv` None) runs under one hash seed (`pin_hash_seed`) and is handed to a
    running `lowerkit daemon` when one matches this interpreter (see `lowerkit.cli.daemon`); an
    explicit `argv` always runs in this process, as it is.
    """
    if argv is None:
        pin_hash_seed()
        redeliver_swallowed_interrupts()
    quiet_libraries()
    if argv is None:
        from lowerkit.cli.daemon.client import forward_if_running

        status = forward_if_running(sys.argv[1:])
        if status is not None:
            sys.exit(status)
    from lowerkit.cli.app import run_app

    run_app(argv)
