"""Hashes of upstream sources a lowerkit package copies or replaces (shared by the packages' tests)."""

from __future__ import annotations

import hashlib
import importlib
import inspect
from collections.abc import Mapping
from typing import Any


def resolve(name: str) -> Any:
    """``"package.module:Class.attr"`` -> the object (staticmethods unwrapped)."""
    module_name, _, path = name.partition(":")
    obj: Any = importlib.import_module(module_name)
    for part in path.split("."):
        owner = obj
        obj = inspect.getattr_static(owner, part) if isinstance(owner, type) else getattr(owner, part)
        if isinstance(obj, (staticmethod, classmethod)):
            obj = obj.__func__
    return inspect.unwrap(obj)


def source_hash(name: str) -> str:
    """sha256 (first 16 hex digits) of ``inspect.getsource`` of an upstream function or class."""
    return hashlib.sha256(inspect.getsource(resolve(name)).encode()).hexdigest()[:16]


def changed(expected: Mapping[str, tuple[str, str]]) -> list[str]:
    """One line per upstream source whose hash differs: what changed and what to re-read."""
    lines = []
    for name, (digest, reread) in expected.items():
        actual = source_hash(name)
        if actual != digest:
            lines.append(f"{name} changed ({digest} -> {actual}): re-read {reread}")
    return lines
