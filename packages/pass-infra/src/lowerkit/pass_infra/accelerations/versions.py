"""Version guards: lowerkit's accelerated paths run only on the library versions they were proven on.

Each package states the versions its sameness with upstream was proven on (``PROVEN_ON``).
On any other installed version the accelerated paths run the stock path instead and warn
once, loudly (`UnprovenVersionWarning`): a copied upstream body or a patched private
function may no longer match what it replaces. Setting ``LOWERKIT_ALLOW_UNPROVEN=1`` runs
the accelerated paths anyway (for re-proving sameness after a bump).
"""

from __future__ import annotations

import functools
import hashlib
import importlib
import inspect
import os
import warnings
from collections.abc import Iterator, Mapping
from contextlib import AbstractContextManager, ExitStack, contextmanager
from importlib import metadata
from typing import Any

from lowerkit.pass_infra.accelerations.patching import lowering_lock

__all__ = [
    "ALLOW_UNPROVEN_ENV",
    "PROVEN_ON",
    "UnprovenVersionWarning",
    "changed_sources",
    "installed_versions",
    "proven",
    "proven_scope",
    "source_hash",
    "unproven_differences",
]

#: The versions lowerkit-pass-infra was proven on (its copies of torch / ExecuTorch code).
PROVEN_ON: Mapping[str, str] = {"torch": "2.13.0", "executorch": "1.5.1"}

#: Set to 1 to run accelerated paths on versions they were not proven on.
ALLOW_UNPROVEN_ENV = "LOWERKIT_ALLOW_UNPROVEN"


class UnprovenVersionWarning(RuntimeWarning):
    """An installed library differs from the version a lowerkit package was proven on."""


def _public(version: str) -> str:
    """``2.13.0+cpu`` -> ``2.13.0`` (a local build tag does not change the sources)."""
    return version.split("+", 1)[0]


@functools.cache
def _installed(distribution: str) -> str | None:
    try:
        return _public(metadata.version(distribution))
    except metadata.PackageNotFoundError:
        return None


def installed_versions(names: Mapping[str, str] | tuple[str, ...]) -> dict[str, str | None]:
    """``{distribution: installed version or None}`` for each name."""
    return {name: _installed(name) for name in names}


def unproven_differences(proven_on: Mapping[str, str]) -> dict[str, tuple[str, str | None]]:
    """``{distribution: (proven, installed)}`` for each library whose version differs."""
    installed = installed_versions(tuple(proven_on))
    return {
        name: (want, installed[name])
        for name, want in proven_on.items()
        if installed[name] != want
    }


_warned: set[str] = set()


def proven(package: str, proven_on: Mapping[str, str], what: str) -> bool:
    """True when `package`'s accelerated path `what` may run; else warn (once) and return False."""
    differences = unproven_differences(proven_on)
    if not differences:
        return True
    allowed = os.environ.get(ALLOW_UNPROVEN_ENV, "") == "1"
    key = f"{package}:{what}:{allowed}"
    if key not in _warned:
        _warned.add(key)
        found = ", ".join(
            f"{name} {have or 'not installed'} (proven on {want})"
            for name, (want, have) in sorted(differences.items())
        )
        action = (
            f"running it anyway because {ALLOW_UNPROVEN_ENV}=1"
            if allowed
            else f"running the stock path instead (set {ALLOW_UNPROVEN_ENV}=1 to force it)"
        )
        warnings.warn(
            f"{package}: {what} was proven on other library versions: {found}; {action}. "
            f"Re-run {package}'s sameness and source-hash tests before trusting it.",
            UnprovenVersionWarning,
            stacklevel=3,
        )
    return allowed


# ------------------------------------------------------------- upstream source hashes
#
# Each package's tests hold the hash of every upstream function or class it copies or
# replaces; a bump that changes one fails with its name and the lowerkit code to re-read.


def _resolve(name: str) -> Any:
    """``"package.module:Class.attr"`` -> the object (staticmethods and wrappers unwrapped)."""
    module_name, _, path = name.partition(":")
    obj: Any = importlib.import_module(module_name)
    for part in path.split("."):
        owner = obj
        obj = inspect.getattr_static(owner, part) if isinstance(owner, type) else getattr(owner, part)
        if isinstance(obj, staticmethod | classmethod):
            obj = obj.__func__
    return inspect.unwrap(obj)


def source_hash(name: str) -> str:
    """First 16 hex digits of the sha256 of ``inspect.getsource`` of ``"module:qualname"``."""
    return hashlib.sha256(inspect.getsource(_resolve(name)).encode()).hexdigest()[:16]


def changed_sources(expected: Mapping[str, tuple[str, str]]) -> list[str]:
    """``{name: (hash, what to re-read)}`` -> one line per upstream source whose hash differs."""
    lines = []
    for name, (digest, reread) in expected.items():
        actual = source_hash(name)
        if actual != digest:
            lines.append(f"{name} changed ({digest} -> {actual}): re-read {reread}")
    return lines


@contextmanager
def proven_scope(
    package: str, proven_on: Mapping[str, str], what: str, *scopes: AbstractContextManager[Any]
) -> Iterator[None]:
    """Hold the lowering lock and, when `package`'s `what` may run (`proven`), `scopes` in order.

    On other versions the block runs stock (none of `scopes` is entered), warned once.
    """
    with lowering_lock():
        if not proven(package, proven_on, what):
            yield
            return
        with ExitStack() as stack:
            for scope in scopes:
                stack.enter_context(scope)
            yield
