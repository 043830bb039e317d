"""signature_lookups: the graph signature's input-name lookups built once per signature state.

``ExportGraphSignature.inputs_to_parameters`` / ``inputs_to_buffers`` /
``inputs_to_lifted_tensor_constants`` are properties that rebuild a dict from every input
spec on each access; ``torch._export.utils.is_param`` / ``is_buffer`` & co. read them once
per node asked about, so a pass that asks about every node costs (nodes x inputs). Inside
`SIGNATURE_LOOKUPS` a lookup is built once per signature state and served from then on.

Why a served lookup is the one stock would build: stock's result is a function of
``signature.input_specs`` alone (each spec's kind, arg, target; the arg's type and name).
An entry is served only when (1) ``signature.input_specs`` is the same list object,
(2) holding the very same spec objects in the same order (identity, element-wise), and
(3) no attribute of any ``InputSpec`` or argument object was assigned since the entry
was built: while the patch is installed those classes' ``__setattr__`` bumps a
generation counter (dataclass ``__init__`` assigns through it too), and any bump
empties the whole cache. A signature whose specs or arguments are not exactly those
classes is never cached. (Writes that bypass ``__setattr__``, through ``__dict__`` or
``object.__setattr__``, are not seen: neither torch nor ExecuTorch writes specs so.)
"""

from __future__ import annotations

import itertools
import operator
import threading
import weakref
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

from lowerkit.pass_infra import _upstream
from lowerkit.pass_infra.accelerations.patching import Patch, Replacement

__all__ = ["SIGNATURE_LOOKUPS", "cached_signature_lookups"]

_STOCK_VIEWS: dict[str, Callable[[Any], Any]] = _upstream.signature_input_views()
_SPEC_CLASSES: tuple[type, ...] = _upstream.signature_argument_classes()
_SPEC_TYPE, _ARG_TYPES = _SPEC_CLASSES[0], frozenset(_SPEC_CLASSES[1:])
_generation = itertools.count(1)
_current_generation = [0]
#: id(signature) -> (weakref to it, its input_specs list, a copy of that list, generation, {view: value}).
_lookups: dict[int, tuple[Any, list[Any], list[Any], int, dict[str, Any]]] = {}
_lookups_lock = threading.Lock()


def _counting_setattr(self: Any, name: str, value: Any) -> None:
    """``object.__setattr__``, and the signature cache's generation moves on."""
    _current_generation[0] = next(_generation)
    object.__setattr__(self, name, value)


def _cacheable(specs: Any) -> bool:
    return type(specs) is list and all(
        type(s) is _SPEC_TYPE and type(getattr(s, "arg", None)) in _ARG_TYPES for s in specs
    )


def _cached_view(signature: Any, view: str) -> Any:
    specs = signature.input_specs
    generation = _current_generation[0]
    key = id(signature)
    with _lookups_lock:
        entry = _lookups.get(key)
        if entry is not None and (
            entry[0]() is not signature
            or entry[1] is not specs
            or entry[3] != generation
            or len(entry[2]) != len(specs)
            or not all(map(operator.is_, entry[2], specs))
        ):
            entry = None
            del _lookups[key]
        if entry is not None and view in entry[4]:
            return entry[4][view]
    value = _STOCK_VIEWS[view](signature)
    if generation != _current_generation[0] or not _cacheable(specs):
        return value
    with _lookups_lock:
        entry = _lookups.get(key)
        if entry is None:
            try:
                ref = weakref.ref(signature)
            except TypeError:
                return value
            entry = (ref, specs, list(specs), generation, {})
            _lookups[key] = entry
        if entry[3] == generation:
            entry[4][view] = value
    return value


def _view_property(view: str) -> property:
    stock = _STOCK_VIEWS[view]

    def get(self: Any) -> Any:
        if SIGNATURE_LOOKUPS.active():
            return _cached_view(self, view)
        return stock(self)

    get.__name__ = get.__qualname__ = view
    get.__doc__ = stock.__doc__
    return property(get)


def _clear_lookups() -> None:
    with _lookups_lock:
        _lookups.clear()


def _signature_replacements() -> list[Replacement]:
    from torch.export.graph_signature import ExportGraphSignature

    # Both kinds of replacement are neutral for threads outside a scope: the properties call
    # the stock getter for them; the __setattr__s assign exactly as object's does.
    return [
        *(Replacement(ExportGraphSignature, view, _view_property(view), dispatch=False) for view in _STOCK_VIEWS),
        *(Replacement(cls, "__setattr__", _counting_setattr, dispatch=False) for cls in _SPEC_CLASSES),
    ]


#: ``inputs_to_parameters`` / ``inputs_to_buffers`` / ``inputs_to_lifted_tensor_constants``
#: built once per signature state (see above) for threads inside ``cached_signature_lookups()``.
SIGNATURE_LOOKUPS = Patch(
    "lowerkit.pass_infra.accelerations.signature_lookups",
    _signature_replacements,
    on_install=[_clear_lookups],
    on_uninstall=[_clear_lookups],
)


@contextmanager
def cached_signature_lookups() -> Iterator[None]:
    """Within the block (this thread), the signature's input-name lookups are served from a cache
    that any change of the input specs invalidates; values are equal to stock's."""
    with SIGNATURE_LOOKUPS.scope():
        yield
