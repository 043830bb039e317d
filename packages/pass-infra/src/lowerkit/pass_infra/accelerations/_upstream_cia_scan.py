"""CIA_SCAN's upstream access: torch's CompositeImplicitAutograd op scan and kernel override,
the same results with less repeated work (see `cia_scan`). Copies of torch's private functions;
their sources are hashed in ``tests/pass_infra_tests/test_upstream_sources.py``.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

import torch
from torch._ops import OpOverload

__all__ = [
    "cia_collect_sites",
    "collect_all_valid_cia_ops",
    "override_composite_implicit_decomp",
    "plain_py_impl",
    "py_impl_owner",
]


def collect_all_valid_cia_ops() -> set[Any]:
    """Copy of ``torch._export.utils._collect_all_valid_cia_ops`` materializing C++ ops once.

    Stock calls ``_materialize_cpp_cia_ops`` (a getattr per CompositeImplicitAutograd
    registration, thousands) once per op namespace; it is idempotent, and nothing registers
    ops between two namespaces of one call, so once per call gives the same set.
    """
    import torch._export.utils as export_utils

    export_utils._materialize_cpp_cia_ops()
    cia_ops: set[Any] = set()
    for op_namespace_name in torch.ops._dir:
        if op_namespace_name != "aten":
            if not hasattr(torch.ops, op_namespace_name):
                raise AssertionError(f"torch.ops does not have attribute {op_namespace_name!r}")
            op_namespace = getattr(torch.ops, op_namespace_name)
            if isinstance(op_namespace, torch._ops._OpNamespace):
                for op in op_namespace:
                    op_packet = getattr(op_namespace, op)
                    for op_overload in op_packet.op_overloads():
                        if export_utils._is_preservable_cia_op(op_overload):
                            cia_ops.add(op_overload)
        else:
            cia_ops |= export_utils._collect_all_valid_cia_ops_for_aten_namespace()
    return cia_ops


def cia_collect_sites() -> list[Any]:
    """The modules that call ``_collect_all_valid_cia_ops`` by their own global name."""
    import torch.export.decomp_utils as decomp_utils
    import torch.export.exported_program as exported_program

    return [exported_program, decomp_utils]


def plain_py_impl(self: Any, k: Any) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
    """Copy of ``torch._ops.OperatorBase.py_impl`` whose inner function has no annotations.

    Stock's inner ``def`` evaluates ``Callable[_P, _T]`` annotations (typing generic
    aliases) every time py_impl is called; ``run_decompositions`` calls it ~6,000 times per
    decomposition table. Same registrations, same errors.
    """
    import inspect

    from torch._C import DispatchKey
    from torch._functorch.pyfunctorch import TransformType
    from torch.utils._python_dispatch import TorchDispatchMode

    def inner(fn):  # type: ignore[no-untyped-def]
        if inspect.isclass(k) and (issubclass(k, TorchDispatchMode) or issubclass(k, torch.Tensor)):
            if k in self.python_key_table:
                raise AssertionError(f"{k} already registered in python_key_table")
            self.python_key_table[k] = fn
            self._dispatch_cache.clear()
            return fn

        if isinstance(k, TransformType):
            if k in self.functorch_table:
                raise AssertionError(f"{k} already registered in functorch_table")
            self.functorch_table[k] = fn
            return fn

        if not isinstance(k, DispatchKey):
            raise AssertionError(f"expected DispatchKey, got {type(k)}")
        if k == DispatchKey.Python:
            raise AssertionError("Please register a mode for the DispatchKey.Python key instead.")

        if k in self.py_kernels:
            raise RuntimeError(f"Trying to override a python impl for {k} on operator {self.name()}")
        self.py_kernels[k] = fn
        self._dispatch_cache.clear()
        return fn

    return inner


def _force_dispatch_to_orig_cia_callable(fake_tensor_mode: Any, op: Any, *args: Any, **kwargs: Any) -> Any:
    """Copy of the fake rule stock defines inside ``_override_composite_implicit_decomp``."""
    orig_cia_callable = kwargs["original_callable"]
    del kwargs["original_callable"]
    with fake_tensor_mode:
        return orig_cia_callable(*args, **kwargs)


def _set_py_kernel(op: Any, key: Any, fn: Any) -> None:
    """``op.py_impl(key)(fn)`` for an OpOverload and a DispatchKey, by assignment.

    py_impl's checks reduce to "not registered yet" for these keys (stock's callers check
    it first); the dispatch cache is cleared once per op by the caller.
    """
    if not isinstance(op, OpOverload):
        op.py_impl(key)(fn)
        return
    if key in op.py_kernels:
        raise RuntimeError(f"Trying to override a python impl for {key} on operator {op.name()}")
    op.py_kernels[key] = fn


@contextmanager
def override_composite_implicit_decomp(cia_ops_to_callable: dict[Any, Any]) -> Iterator[None]:
    """Copy of ``torch.export.exported_program._override_composite_implicit_decomp``.

    Same kernels registered and restored, for the same ops and keys; registered by dict
    assignment (`_set_py_kernel`) instead of ~12 ``py_impl`` calls per op (about 3,000 ops
    per ``run_decompositions``, a fixed ~0.3 s that dominates the lowering of small models).
    """
    import torch.export.exported_program as ep

    cia_key = torch._C.DispatchKey.CompositeImplicitAutograd
    saved_tables = {}
    patched_ops = set()
    for op_overload, decomp_callable in cia_ops_to_callable.items():
        saved_tables[op_overload] = op_overload.py_kernels.copy()
        patched_ops.add(op_overload)
        for override_dispatch_key in ep._AUTOGRAD_ALIAS_BACKEND_KEYS_TO_OVERRIDE:
            if override_dispatch_key not in op_overload.py_kernels:
                _set_py_kernel(
                    op_overload,
                    override_dispatch_key,
                    ep.autograd_not_implemented(op_overload, deferred_error=True),
                )
        orig_cia_callable = ep._get_decomp_for_cia(op_overload)
        if cia_key in op_overload.py_kernels:
            del op_overload.py_kernels[cia_key]
        _set_py_kernel(op_overload, cia_key, decomp_callable)
        if not ep._is_op_registered_to_fake_rule(op_overload):
            ep.register_op_impl(op_overload)(
                functools.partial(_force_dispatch_to_orig_cia_callable, original_callable=orig_cia_callable)
            )
        for key in ep._BACKEND_KEYS_TO_OVERRIDE:
            if key not in op_overload.py_kernels:
                _set_py_kernel(op_overload, key, orig_cia_callable)
        op_overload._dispatch_cache.clear()
    try:
        yield
    finally:
        for op in patched_ops:
            op.py_kernels.clear()
            op.py_kernels.update(saved_tables[op])
            op._dispatch_cache.clear()
            ep._deregister_op_impl(op)


def py_impl_owner() -> type:
    """The class whose ``py_impl`` OpOverloads use (``torch._ops.OperatorBase``)."""
    return torch._ops.OperatorBase
