"""Errors a user can cause, each with the exit code the CLI returns for it."""

from __future__ import annotations


class CliError(Exception):
    """A failure reported as one line, without a traceback."""

    exit_code = 1


class UsageError(CliError):
    """The command line names something that does not exist or does not fit (exit code 2)."""

    exit_code = 2


class LoweringError(CliError):
    """Lowering started but could not finish (exit code 1)."""

    exit_code = 1
