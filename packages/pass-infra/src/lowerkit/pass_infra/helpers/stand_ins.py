"""Stand-in modules in ``sys.modules`` for the time of an import, and only then."""

from __future__ import annotations

import contextlib
import sys
from collections.abc import Iterator, Mapping
from types import ModuleType

__all__ = ["modules_standing_in"]


@contextlib.contextmanager
def modules_standing_in(modules: Mapping[str, ModuleType]) -> Iterator[None]:
    """`modules` in ``sys.modules`` under their names for the block; what was there before, after.

    For upstream code whose own imports must find a stand-in (a module that cannot share the
    process, or cannot be imported at all) without the stand-in outliving that code's import.
    """
    saved = {name: sys.modules.get(name) for name in modules}
    sys.modules.update(modules)
    try:
        yield
    finally:
        for name, previous in saved.items():
            if previous is None:
                sys.modules.pop(name, None)
            else:
                sys.modules[name] = previous
