"""Idempotent registration of lowerkit's translations in coremltools' torch frontend registry.

Winner rule (deterministic, whatever the import order): while registered, every name in
:func:`registered_ops` maps to lowerkit's translation. A later ``register_torch_op`` for one of
those names (e.g. ExecuTorch's ``backends/apple/coreml/compiler/torch_ops.py``, imported before
or after :func:`register`) is accepted without a double-registration error, exactly as it would
be without lowerkit (it sees the entry lowerkit replaced), and is remembered: :func:`unregister`
puts back the last translation anyone else registered for each name.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any

from lowerkit.coreml_compiler_ops import _upstream, translations


def _folding(name: str, fold: Callable[[Any, Any], bool]) -> _upstream.TranslationFn:
    """Translation for ``name``: ``fold`` if it applies, else the translation lowerkit displaced."""

    def translation(context: Any, node: Any) -> None:
        if fold(context, node):
            return
        fallback = displaced_translation(name)
        if fallback is None:
            raise LookupError(f"coremltools has no translation for {name!r} to fall back on")
        fallback(context, node)

    translation.__name__ = name
    translation.__qualname__ = f"lowerkit_{name}"
    return translation


_FOLDS: dict[str, Callable[[Any, Any], bool]] = {
    "mul": translations.fold_int8_weight_mul,
    **{
        name: translations.fold_int8_constant_transpose
        for name in ("transpose", "t", "numpy_t", "transpose_copy", "permute", "permute_copy")
    },
}


_TABLE: dict[str, _upstream.TranslationFn] = {
    **{name: _folding(name, fold) for name, fold in _FOLDS.items()},
    "split_copy": translations.split_copy,
    "dim_order_ops._to_dim_order_copy": translations.to_dim_order_copy,
    "dim_order_ops._empty_dim_order": translations.empty_dim_order,
    "_clone_dim_order": translations.clone_dim_order,
    "dim_order_ops::_clone_dim_order": translations.clone_dim_order,
    "dim_order_ops._clone_dim_order": translations.clone_dim_order,
    "dequantize_affine": translations.dequantize_affine,
    "torchao::dequantize_affine": translations.dequantize_affine,
    "torchao.dequantize_affine": translations.dequantize_affine,
    "dequantize_codebook": translations.dequantize_codebook,
    "quant::dequantize_codebook": translations.dequantize_codebook,
    "quant.dequantize_codebook": translations.dequantize_codebook,
}

_LOCK = threading.RLock()
_MISSING = object()
# name -> what the registry held for it apart from lowerkit (_MISSING: nothing).
_displaced: dict[str, Any] = {}
_registered = False


def registered_ops() -> tuple[str, ...]:
    """Registry names (coremltools' sanitized op kinds) that :func:`register` takes over."""
    return tuple(sorted(_TABLE))


def _mapping() -> dict[str, Any]:
    mapping: dict[str, Any] = _upstream.REGISTRY.name_to_func_mapping
    return mapping


def _guarded_register_func(
    func: Any = None, torch_alias: list[str] | None = None, override: bool = False
) -> None:
    """``register_func`` that lets others register lowerkit's names without taking them over."""
    with _LOCK:
        mapping = _mapping()
        names = [func.__name__, *(torch_alias or [])]
        ours = {
            name: mapping[name]
            for name in names
            if name in _TABLE and mapping.get(name) is _TABLE[name]
        }
        for name in ours:
            previous = _displaced.get(name, _MISSING)
            if previous is _MISSING:
                del mapping[name]
            else:
                mapping[name] = previous
        try:
            _upstream.original_register_func(func, torch_alias, override)
        finally:
            for name, fn in ours.items():
                _displaced[name] = mapping.get(name, _MISSING)
                mapping[name] = fn


def register() -> None:
    """Register lowerkit's translations (idempotent; lowerkit wins for its names, see module doc)."""
    global _registered
    with _LOCK:
        mapping = _mapping()
        for name, fn in _TABLE.items():
            current = mapping.get(name, _MISSING)
            if current is not fn:
                _displaced[name] = current
                mapping[name] = fn
        _upstream.install_register_func(_guarded_register_func)
        _registered = True


def unregister() -> None:
    """Undo :func:`register`: each name maps to what others registered for it, as if lowerkit never had."""
    global _registered
    with _LOCK:
        mapping = _mapping()
        for name, fn in _TABLE.items():
            if mapping.get(name) is not fn:
                continue
            previous = _displaced.get(name, _MISSING)
            if previous is _MISSING:
                mapping.pop(name, None)
            else:
                mapping[name] = previous
        _displaced.clear()
        _upstream.install_register_func(None)
        _registered = False


def is_registered() -> bool:
    """Whether every lowerkit translation is currently the registry's entry for its name."""
    with _LOCK:
        mapping = _mapping()
        return _registered and all(mapping.get(name) is fn for name, fn in _TABLE.items())


def displaced_translation(name: str) -> _upstream.TranslationFn | None:
    """The translation someone else registered for ``name`` that lowerkit's currently shadows."""
    with _LOCK:
        previous = _displaced.get(name, _MISSING)
        return None if previous is _MISSING else previous
