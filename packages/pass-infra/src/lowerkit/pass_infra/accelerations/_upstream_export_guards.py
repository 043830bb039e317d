"""EXPORT_GUARDS' upstream access: Dynamo's guard builder and its common-subexpression pass
(see `export_guards`). Wrappers of torch's private methods, which they call unchanged; their
sources are hashed in ``tests/pass_infra_tests/test_upstream_sources.py``.
"""

from __future__ import annotations

from contextvars import ContextVar
from typing import Any

from torch._dynamo import guards as dynamo_guards  # private: Dynamo's guard builder

__all__ = ["GuardBuilder", "PyExprCSEPass", "add_lambda_guard", "count", "replace"]

GuardBuilder = dynamo_guards.GuardBuilder
PyExprCSEPass = dynamo_guards.PyExprCSEPass

#: torch's own methods (taken at import: before any lowerkit scope).
_STOCK_ADD_LAMBDA_GUARD = GuardBuilder.add_python_lambda_leaf_guard_to_root
_STOCK_COUNT = PyExprCSEPass.count
_STOCK_REPLACE = PyExprCSEPass.replace

#: True while a guard function is built for an export (the subexpression pass then does nothing).
_FOR_EXPORT: ContextVar[bool] = ContextVar("lowerkit_export_guard_function", default=False)


def add_lambda_guard(self: Any, *args: Any, **kwargs: Any) -> None:
    """``GuardBuilder.add_python_lambda_leaf_guard_to_root``: stock's, with the subexpression pass
    off when the guards are an export's."""
    output_graph = self.check_fn_manager.output_graph
    if output_graph is None or not output_graph.export:
        _STOCK_ADD_LAMBDA_GUARD(self, *args, **kwargs)
        return
    token = _FOR_EXPORT.set(True)
    try:
        _STOCK_ADD_LAMBDA_GUARD(self, *args, **kwargs)
    finally:
        _FOR_EXPORT.reset(token)


def count(self: Any, exprs: list[str]) -> None:
    """``PyExprCSEPass.count``: counts nothing for an export's guard function, else stock's."""
    if not _FOR_EXPORT.get():
        _STOCK_COUNT(self, exprs)


def replace(self: Any, expr: str) -> tuple[list[str], str]:
    """``PyExprCSEPass.replace``: for an export's guard function, `expr` unchanged and no preface
    (what torch's ``build_guard_function`` uses when the pass hits the recursion limit)."""
    if _FOR_EXPORT.get():
        return [], expr
    result: tuple[list[str], str] = _STOCK_REPLACE(self, expr)
    return result
