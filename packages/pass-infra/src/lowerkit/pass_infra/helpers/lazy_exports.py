"""lazy_exports: a package facade that lists its names once and loads them on first use (no torch import).

A package lists its public names once, as imports under ``if TYPE_CHECKING:`` in its
``__init__.py``, one name a line with a comment (its one-line doc): type checkers read them as
imports, and `lazy_exports` reads the same block from the package's source to give the package its
``__all__``, a ``__getattr__`` that imports a name's defining module on first use (PEP 562) and a
``__dir__``, as scientific Python's ``lazy_loader.attach_stub`` reads a stub file.
"""

from __future__ import annotations

import ast
import importlib
import sys
from collections.abc import Callable
from typing import Any

__all__ = ["exported_names", "lazy_exports"]


def exported_names(package: str) -> dict[str, str]:
    """Name -> defining module, for each import under ``if TYPE_CHECKING:`` in `package`'s ``__init__``."""
    spec = sys.modules[package].__spec__
    source = spec.loader.get_source(package) if spec is not None and spec.loader is not None else None  # type: ignore[attr-defined]
    if source is None:
        raise ImportError(f"{package}: lazy_exports needs the package's source")
    names: dict[str, str] = {}
    for node in ast.parse(source).body:
        if isinstance(node, ast.If) and isinstance(node.test, ast.Name) and node.test.id == "TYPE_CHECKING":
            for statement in node.body:
                if isinstance(statement, ast.ImportFrom) and statement.module and statement.level == 0:
                    names.update((alias.asname or alias.name, statement.module) for alias in statement.names)
    return names


def lazy_exports(package: str) -> tuple[list[str], Callable[[str], Any], Callable[[], list[str]]]:
    """``__all__``, ``__getattr__`` and ``__dir__`` for `package`, from its ``TYPE_CHECKING`` imports."""
    exports = exported_names(package)
    namespace = vars(sys.modules[package])

    def __getattr__(name: str) -> Any:
        module = exports.get(name)
        if module is None:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        value = getattr(importlib.import_module(module), name)
        namespace[name] = value
        return value

    def __dir__() -> list[str]:
        return sorted(exports)

    return sorted(exports), __getattr__, __dir__
