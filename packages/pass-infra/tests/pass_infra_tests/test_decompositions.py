"""CIA_SCAN's copy of torch's CompositeImplicitAutograd override registers what stock registers."""

from __future__ import annotations

from typing import Any

import torch
import torch.export.exported_program as ep
from torch._subclasses.fake_impls import _is_op_registered_to_fake_rule

from lowerkit.pass_infra.accelerations import _upstream_cia_scan


def _cia_table() -> dict[Any, Any]:
    """What ``run_decompositions`` passes for the default (core ATen) table."""
    table = torch.export.default_decompositions().materialize()
    cia_ops_to_callable, _ = ep._split_decomp_table_to_cia_and_python_decomp(table)
    return cia_ops_to_callable


def _kernels(ops: list[Any]) -> dict[str, Any]:
    """Per op: its Python kernel keys, its CIA kernel, and whether it has a fake rule."""
    cia = torch._C.DispatchKey.CompositeImplicitAutograd
    return {
        op.name(): (
            sorted(str(k) for k in op.py_kernels),
            op.py_kernels.get(cia),
            _is_op_registered_to_fake_rule(op),
            len(op._dispatch_cache),
        )
        for op in ops
    }


def test_override_registers_and_restores_what_stock_does() -> None:
    table = _cia_table()
    ops = sorted(table, key=lambda op: op.name())
    assert len(ops) > 100  # the real table, not an empty one
    # Stock's exit deregisters the fake rules of every op it touched, even those registered
    # before: run it once first so that both sides start from the same state.
    with ep._override_composite_implicit_decomp(table):
        pass
    start = _kernels(ops)
    with ep._override_composite_implicit_decomp(table):
        stock = _kernels(ops)
    stock_after = _kernels(ops)
    assert stock_after == start
    with _upstream_cia_scan.override_composite_implicit_decomp(table):
        lowerkit = _kernels(ops)
    assert lowerkit == stock
    assert _kernels(ops) == stock_after
    assert stock != start  # the override did register kernels


def test_override_refuses_a_key_already_registered_like_py_impl() -> None:
    op = torch.ops.aten.linear.default
    key = torch._C.DispatchKey.AutogradCPU

    def kernel(*args: Any, **kwargs: Any) -> Any:
        return None

    _upstream_cia_scan._set_py_kernel(op, key, kernel)
    try:
        try:
            _upstream_cia_scan._set_py_kernel(op, key, kernel)
        except RuntimeError as error:
            assert "Trying to override a python impl" in str(error)
        else:
            raise AssertionError("a second registration was accepted")
    finally:
        del op.py_kernels[key]
        op._dispatch_cache.clear()
