"""`reexport`: a strict re-export of an unchanged ``ExportedProgram.module()`` built from the first
export gives what torch's re-export gives; anything else is left to torch.

The LLM builder's own re-export is compared live in ``tests/llm_export/test_llm_sameness.py``.
"""

from __future__ import annotations

from typing import Any

import pytest
import torch

from lowerkit.pass_infra.accelerations.patching import suspend_all
from lowerkit.pass_infra.accelerations.reexport import REEXPORT, reexported
from pass_infra.test_retrace_skip import _SMALL, _assert_same


class _Cache(torch.nn.Module):
    """A KV-cache-like write (a buffer updated in place), non-persistent buffers, a cast export
    asserts (``_assert_tensor_metadata``) and a two-output op (getitems)."""

    def __init__(self) -> None:
        super().__init__()
        self.proj = torch.nn.Linear(8, 8)
        self.register_buffer("cache", torch.zeros(4, 8))
        self.register_buffer("scale", torch.linspace(0.5, 1.5, 8), persistent=False)
        # non-persistent buffers' names sit in a set: their order is the hash seed's, the constants' is not
        self.register_buffer("shift", torch.linspace(-1.0, 1.0, 8), persistent=False)
        self.register_buffer("bias", torch.full((8,), 0.25), persistent=False)

    def forward(self, x: torch.Tensor, pos: torch.Tensor) -> torch.Tensor:
        y = self.proj(x).to(torch.float32) * self.scale + self.shift * self.bias
        self.cache.index_put_((pos,), y)
        low, high = self.cache.split(2)
        return (low.sum(0) + high.sum(0)).type_as(x)


def _inputs() -> tuple[torch.Tensor, torch.Tensor]:
    return torch.randn(1, 8), torch.tensor([1])


def _export(module: torch.nn.Module, inputs: tuple[Any, ...]) -> torch.export.ExportedProgram:
    """How ExecuTorch's LLM builder exports: strict, under no_grad, then ``run_decompositions({})``."""
    with torch.no_grad():
        return torch.export.export(module, inputs, strict=True).run_decompositions({})


def _module(program: torch.export.ExportedProgram) -> torch.fx.GraphModule:
    """``program.module()`` as ExecuTorch's code gets it: torch makes no ``_guards_fn`` call for
    ExecuTorch's callers (``torch.export._unlift._ok_to_generate_guards_fn``), and `reexport`
    leaves a module with one to torch."""
    return program.module(check_guards=False)


def _first(name: str) -> tuple[torch.export.ExportedProgram, tuple[Any, ...]]:
    torch.manual_seed(0)
    if name == "cache":
        inputs: tuple[Any, ...] = _inputs()
        return _export(_Cache().eval(), inputs), inputs
    inputs = (torch.randn(1, 3, 10, 10),)
    return _export(_SMALL[name]().eval(), inputs), inputs


@pytest.fixture()
def first() -> tuple[torch.export.ExportedProgram, tuple[Any, ...]]:
    return _first("cache")


#: A view functionalization regenerated in the first trace (its metadata is not a trace's): torch's.
_LEFT_TO_TORCH = ("mutates_a_view",)


@pytest.mark.parametrize("name", ["cache", *_SMALL])
def test_an_unchanged_module_reexports_as_torch_reexports_it(name: str) -> None:
    """The cache module, and the local decomposition's cases (in-place ops, multi-output ops, views
    of in-place results, casts): metadata, names (the first trace's gaps closed), weights."""
    program, inputs = _first(name)
    with REEXPORT.scope():
        module = _module(program)
        ours = reexported(module, inputs, None, None)
    if name in _LEFT_TO_TORCH:
        assert ours is None
        return
    assert ours is not None
    with suspend_all():
        stock = _export(module, inputs)
    _assert_same(stock, ours)
    assert list(ours.constants) == list(stock.constants)
    assert all(ours.constants[k] is module.get_buffer(k) for k in ours.constants)
    assert str(ours.example_inputs) == str(stock.example_inputs)
    assert ours.range_constraints == stock.range_constraints
    assert ours._guards_code == stock._guards_code


def test_anything_else_is_left_to_torch(first: Any) -> None:
    program, inputs = first
    outside = _module(program)  # made outside the scope: its origin is unknown
    assert reexported(outside, inputs, None, None) is None
    with REEXPORT.scope():
        module = _module(program)
        assert reexported(module, _inputs(), None, None) is None  # other input tensors
        assert reexported(module, inputs, None, {"x": None, "pos": None}) is None  # dynamic shapes
        edited = _module(program)
        call = next(n for n in edited.graph.nodes if n.op == "call_function")
        call.meta = {**call.meta, "custom": {"tag": 1}}  # its metadata changed since .module()
        assert reexported(edited, inputs, None, None) is None
        changed = _module(program)
        program.graph_module.graph.eliminate_dead_code()  # nothing to drop: the program is unchanged
        assert reexported(changed, inputs, None, None) is not None
        next(n for n in program.graph.nodes if n.op == "call_function").meta["custom"] = {}
        assert reexported(changed, inputs, None, None) is None  # its program changed since
    program, inputs = _first("cache")
    with REEXPORT.scope():
        kept = _module(program)
    assert reexported(kept, inputs, None, None) is None  # forgotten when the scope closed
