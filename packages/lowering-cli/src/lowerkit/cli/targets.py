"""The lowering targets the CLI knows, each registered with the backend that lowers it.

A target is declared once, as a row of its backend's table (`backends.arm.targets.TARGET_TABLE`,
`backends.coreml.targets.TARGET_TABLE`); this module registers the backends and answers, for
any target, its backend (`backend_of`) and whether the options given apply to it
(`check_options`), and for a delegate in a .pte, how to read its payload (`DECODERS`).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from lowerkit.cli.backend import Backend, Given, PayloadDecoder, TargetOption, is_given
from lowerkit.cli.backends.arm.backend import ARM
from lowerkit.cli.backends.coreml.backend import COREML
from lowerkit.cli.errors import UsageError
from lowerkit.cli.options import Target
from lowerkit.pass_infra.helpers.suggest import did_you_mean

__all__ = [
    "BACKENDS", "DECODERS", "OPTIONS", "TARGETS", "backend_of", "check_applicable", "check_options", "describe", "get",
    "option", "register",
]

#: Every backend family, by `Target.backend`, in the order `lowerkit targets` lists them.
BACKENDS: dict[str, Backend] = {}

#: Every `-t` target, by name.
TARGETS: dict[str, Target] = {}

#: Every option only some targets take, by flag.
OPTIONS: dict[str, TargetOption] = {}

#: How `inspect` and `compare` read a delegate's payload, by its backend id in the .pte.
DECODERS: dict[str, PayloadDecoder] = {}


def register(backend: Backend) -> None:
    """Add `backend`, its targets, options and payload decoders to the registry.

    Before `lowerkit.cli.app` is imported: the commands make their flags from `OPTIONS` then.
    """
    BACKENDS[backend.family] = backend
    TARGETS.update({target.name: target for target in backend.targets})
    OPTIONS.update({option.flag: option for option in backend.options})
    DECODERS.update({decoder.backend_id: decoder for decoder in backend.decoders})


for _backend in (COREML, ARM):
    register(_backend)


def get(name: str) -> Target:
    """The target called `name`, or a UsageError listing the valid ones."""
    try:
        return TARGETS[name]
    except KeyError:
        raise UsageError(
            f"unknown target '{name}'.{did_you_mean(name, list(TARGETS))} Valid targets: {', '.join(TARGETS)}"
        ) from None


def backend_of(target: Target) -> Backend:
    """The backend that lowers `target`."""
    return BACKENDS[target.backend]


def option(flag: str) -> TargetOption:
    """The option `flag` ("--coreml-passes")."""
    return OPTIONS[flag]


def check_applicable(target: Target, given: Given, *, warn: list[str]) -> dict[str, Any]:
    """The options of `given` that `target` takes; a UsageError (one line) for one it refuses.

    An option the target ignores (as upstream does) is dropped with a line appended to `warn`.
    """
    unknown = set(given) - set(OPTIONS)
    if unknown:
        raise ValueError(f"no backend declares {sorted(unknown)}")
    taken: dict[str, Any] = {}
    for flag, declared in OPTIONS.items():
        value = given.get(flag)
        if not is_given(value):
            continue
        if declared.takes(target):
            taken[flag] = value
            continue
        warning = declared.ignored(target)
        if warning is None:
            raise UsageError(declared.refusal(target))
        warn.append(warning)
    return taken


def check_options(target: Target, given: Given, *, warn: list[str]) -> Any:
    """The `LowerOptions.settings` of the options `given`, checked for `target` before any work.

    First whether each applies (`check_applicable`), then the target's backend's own checks.
    """
    return backend_of(target).settings(target, check_applicable(target, given, warn=warn))


def describe(chosen: Callable[[Target], bool]) -> str:
    """The targets `chosen` picks, as messages list them: a whole backend as "any Arm target",
    a whole group by its pattern ("ethos-u*"), the rest by name."""
    parts: list[str] = []
    for backend in BACKENDS.values():
        picked = [target for target in backend.targets if chosen(target)]
        if picked and len(picked) == len(backend.targets):
            parts.append(f"any {backend.title} target")
            continue
        for target in picked:
            pattern = backend.pattern(target)
            group = [t for t in backend.targets if pattern is not None and backend.pattern(t) == pattern]
            name = pattern if pattern is not None and all(chosen(t) for t in group) else target.name
            if name not in parts:
                parts.append(name)
    return ", ".join(parts)
