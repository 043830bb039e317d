"""Fresh attribute names for pt2e's observers and constants, found without a walk from zero.

``get_new_attr_name_with_prefix(prefix)(module)`` (torch.ao's, and torchao's copy) returns the
first ``prefix + str(i)``, i = 0, 1, ..., that ``module`` has no attribute of. ``prepare_pt2e``
names every observer with it and ``convert_pt2e`` every scale and zero point, so N of them make
~N²/2 ``hasattr`` calls, each a failed ``Module.__getattr__`` raising: 0.9 s of DeiT-tiny's
TOSA INT quantization.

`FRESH_ATTRIBUTE_NAMES` remembers, per module and prefix, the names ``prefix0 ..`` it found
taken by its submodules or buffers (``hasattr`` is true of those). While all of them still are
(two C-level subset tests), the walk resumes after them; otherwise (one was deleted, or became
another kind of attribute) it starts from 0, as stock does. Either way the name is the first free one: stock's.
"""

from __future__ import annotations

import weakref
from collections.abc import Callable

import torch

from lowerkit.pass_infra import _upstream
from lowerkit.pass_infra.accelerations.patching import Patch, Replacement

__all__ = ["FRESH_ATTRIBUTE_NAMES", "fresh_attribute_namer"]


class _Taken:
    """The names prefix0 .. prefix{count-1} of one module, all found to be its submodules or buffers."""

    __slots__ = ("buffers", "count", "submodules")

    def __init__(self) -> None:
        self.count = 0
        self.submodules: set[str] = set()
        self.buffers: set[str] = set()

    def still_there(self, module: torch.nn.Module) -> bool:
        submodules, buffers = _upstream.own_attribute_names(module)
        return submodules >= self.submodules and buffers >= self.buffers

    def add(self, module: torch.nn.Module, name: str) -> bool:
        """Remember `name` (the next one) if `module` holds it as a submodule or buffer."""
        submodules, buffers = _upstream.own_attribute_names(module)
        kind = self.submodules if name in submodules else self.buffers if name in buffers else None
        if kind is None:
            return False
        kind.add(name)
        self.count += 1
        return True


#: Module -> prefix -> what is known taken.
_taken: weakref.WeakKeyDictionary[torch.nn.Module, dict[str, _Taken]] = weakref.WeakKeyDictionary()


def fresh_attribute_namer(prefix: str) -> Callable[[torch.nn.Module], str]:
    """``get_new_attr_name_with_prefix(prefix)``: the first ``prefix + str(i)`` `module` has no attribute of."""
    prefix = prefix.replace(".", "_")

    def fresh_name(module: torch.nn.Module) -> str:
        known = _taken.setdefault(module, {}).get(prefix)
        if known is None or not known.still_there(module):
            known = _taken[module][prefix] = _Taken()
        i = known.count
        contiguous = True
        while hasattr(module, name := prefix + str(i)):
            contiguous = contiguous and known.add(module, name)
            i += 1
        return name

    return fresh_name


def _replacements() -> list[Replacement]:
    return [
        Replacement(module, _upstream.ATTRIBUTE_NAMER, fresh_attribute_namer)
        for module in _upstream.attribute_namer_users()
    ]


#: Held by ``accelerated_quantization()``.
FRESH_ATTRIBUTE_NAMES = Patch("lowerkit.pass_infra.accelerations.attribute_names", _replacements)
