"""faketensor_cache: FakeTensor's dispatch cache extended to ExecuTorch op namespaces."""

from __future__ import annotations

import threading
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from typing import Any

from lowerkit.pass_infra import _upstream
from lowerkit.pass_infra._upstream import FakeTensorMode, OpOverload
from lowerkit.pass_infra.accelerations.patching import Patch, Replacement
from lowerkit.pass_infra.accelerations.versions import PROVEN_ON, proven_scope
from lowerkit.pass_infra.errors import PassInfraError

__all__ = ["EXECUTORCH_NAMESPACES", "FAKE_CACHE", "faketensor_cache"]

#: The op namespaces ExecuTorch lowering dispatches through FakeTensor, which stock
#: FakeTensor never caches (it caches aten/prim/prims only).
EXECUTORCH_NAMESPACES: frozenset[str] = frozenset(
    {
        "quantized_decomposed",
        "tosa",
        "dim_order_ops",
        "cortex_m",
        "executorch_prim",
        "llama",
        "torchao",
    }
)


_cache_tls = threading.local()
#: Cache entries added for non-builtin ops while FAKE_CACHE is installed: (cache, key, present, old).
_added: list[tuple[dict[Any, Any], Any, bool, Any]] = []
#: Stock's negative entries for non-builtin ops, set aside while FAKE_CACHE is installed.
_set_aside: dict[Any, Any] = {}
_cache_lock = threading.Lock()


def _namespace(func: Any) -> str | None:
    return func.namespace if isinstance(func, OpOverload) else None


def _cached_by_us(func: Any) -> bool:
    """An op stock FakeTensor never caches (not aten / prim / prims)."""
    return isinstance(func, OpOverload) and not _upstream.stock_is_builtin(func)


def _is_builtin(op: Any) -> bool:
    if getattr(_cache_tls, "validating", False) and _namespace(op) in FAKE_CACHE.options():
        return True
    return _upstream.stock_is_builtin(op)


def _validate_cache_key(self: Any, func: Any, args: Any, kwargs: Any) -> None:
    _cache_tls.validating = True
    try:
        _upstream.stock_validate_cache_key(self, func, args, kwargs)
    finally:
        _cache_tls.validating = False


def _record(cache: dict[Any, Any], key: Any) -> None:
    if _cached_by_us(_upstream.cache_key_func(key)):
        with _cache_lock:
            present = key in cache
            _added.append((cache, key, present, cache.get(key)))


def _set_cache_key(cache: dict[Any, Any], key: Any, entry: Any) -> None:
    _record(cache, key)
    _upstream.stock_set_cache_key(cache, key, entry)


def _set_cache_key_for_shape_env(cache: dict[Any, Any], key: Any, entry: Any) -> None:
    _record(cache, key)
    _upstream.stock_set_cache_key_for_shape_env(cache, key, entry)


def _set_aside_negative_entries() -> None:
    cache = _upstream.fake_cache()
    for key, entry in list(cache.items()):
        if isinstance(entry, _upstream.bypass_entry_type) and _cached_by_us(
            _upstream.cache_key_func(key)
        ):
            _set_aside[key] = cache.pop(key)


def _undo_cache_entries() -> None:
    with _cache_lock:
        for cache, key, present, old in reversed(_added):
            if present:
                cache[key] = old
            else:
                cache.pop(key, None)
        _added.clear()
    _upstream.fake_cache().update(_set_aside)
    _set_aside.clear()


def _cache_replacements() -> list[Replacement]:
    return [
        Replacement(_upstream.library_utils, "is_builtin", _is_builtin),
        Replacement(FakeTensorMode, "_validate_cache_key", _validate_cache_key),
        Replacement(_upstream.fake_cache_module, "_set_cache_key", _set_cache_key),
        Replacement(
            _upstream.fake_cache_module, "_set_cache_key_for_shape_env", _set_cache_key_for_shape_env
        ),
    ]


#: FakeTensor's dispatch cache also covers the namespaces a scope names (``faketensor_cache``).
#: Inside it ``_validate_cache_key`` treats those namespaces as builtin (every other check
#: still applies). Stock's negative entries for non-builtin ops are set aside while it is
#: installed and every entry added for them is recorded; the last scope out removes the
#: added entries and puts the set-aside ones back, so the cache holds what it held before.
FAKE_CACHE = Patch(
    "lowerkit.pass_infra.accelerations.fake_cache",
    _cache_replacements,
    on_install=[_set_aside_negative_entries],
    on_uninstall=[_undo_cache_entries],
)


@contextmanager
def faketensor_cache(namespaces: Iterable[str] = EXECUTORCH_NAMESPACES) -> Iterator[None]:
    """Let FakeTensor's dispatch cache cover `namespaces`; restore its global state on exit.

    Only for the thread inside the block (which holds the process-wide lowering lock);
    scopes nest, the last one out restores. Stock behaviour (with an
    ``UnprovenVersionWarning``) on versions other than ``PROVEN_ON``.
    """
    if isinstance(namespaces, str):
        raise PassInfraError(
            f"namespaces must be a collection of names, got the string {namespaces!r}; "
            f"write namespaces=[{namespaces!r}]"
        )
    wanted = frozenset(namespaces)
    builtin = wanted & {"aten", "prim", "prims"}
    if builtin:
        raise PassInfraError(
            f"namespaces {sorted(builtin)} are cached by FakeTensor already; leave them out"
        )
    with proven_scope("lowerkit-pass-infra", PROVEN_ON, "faketensor_cache", FAKE_CACHE.scope(wanted)):
        yield
