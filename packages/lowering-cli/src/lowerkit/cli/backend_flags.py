"""The command-line flags of every backend's options, made from their declarations (`TargetOption`).

`backend_flags("lower")` adds a click option for each `lower` option every registered backend
declares; the command gets their values as one mapping, `given`, by flag (None / False: not
given). A new option is declared in its backend only: no command names it.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from pathlib import Path
from typing import Any

import click

from lowerkit.cli import targets
from lowerkit.cli.backend import Given, TargetOption, is_given


def _parameter(option: TargetOption) -> str:
    """Its click parameter name, apart from every other parameter of the command."""
    return "backend_" + option.flag.removeprefix("--").replace("-", "_")


def _click_option(option: TargetOption) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
    kinds: dict[str, dict[str, Any]] = {
        "text": {},
        "path": {"type": click.Path(path_type=Path)},
        "flag": {"is_flag": True},
    }
    return click.option(option.flag, _parameter(option), help=option.help, **kinds[option.kind])


def backend_flags(command: str) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
    """Add every backend's `command` options to a click command; its function gets them as `given`."""
    declared = [option for option in targets.OPTIONS.values() if option.command == command]

    def decorate(function: Callable[..., Any]) -> Callable[..., Any]:
        @functools.wraps(function)
        def with_given(*args: Any, **kwargs: Any) -> Any:
            given = {option.flag: kwargs.pop(_parameter(option)) for option in declared}
            return function(*args, given=given, **kwargs)

        decorated: Callable[..., Any] = with_given
        for option in reversed(declared):
            decorated = _click_option(option)(decorated)
        return decorated

    return decorate


def written_files(given: Given) -> list[Path]:
    """The files the options `given` ask `lower` to write (to check them writable before any work)."""
    return [value for flag, value in given.items() if targets.option(flag).writes and is_given(value)]


def parsed(given: Given) -> dict[str, Any]:
    """The options given on the command line, as the backends take them (`TargetOption.parse`)."""
    values = {flag: targets.option(flag).parse(value) for flag, value in given.items() if is_given(value)}
    return {flag: value for flag, value in values.items() if value is not None}
