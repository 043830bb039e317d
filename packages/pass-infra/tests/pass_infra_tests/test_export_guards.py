"""EXPORT_GUARDS: a strict export builds its discarded guard function without the subexpression
pass; the exported program, and any constraint violation, are stock's."""

from __future__ import annotations

import re
from typing import Any

import pytest
import torch
from torch._dynamo import guards as dynamo_guards
from torch.export import Dim, ExportedProgram

from lowerkit.pass_infra.accelerations.export_guards import EXPORT_GUARDS


class _Block(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.linear = torch.nn.Linear(8, 8)
        self.norm = torch.nn.LayerNorm(8)
        self.register_buffer("cache", torch.zeros(2, 8))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.norm(self.linear(x) + self.cache[: x.shape[0]])


class _Specializing(torch.nn.Module):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x + 1 if x.shape[0] == 4 else x - 1


def _block() -> _Block:
    torch.manual_seed(0)
    return _Block()


def _strict_export(model: torch.nn.Module, *args: Any, **kwargs: Any) -> ExportedProgram:
    return torch.export.export(model, args, strict=True, **kwargs)


def _program(program: ExportedProgram) -> tuple[Any, ...]:
    """What a backend reads of a program: code, signature, state and each node's metadata
    (without the object ids that differ export to export: module-stack keys, graph ids)."""
    meta = [
        (
            node.name, list((node.meta.get("nn_module_stack") or {}).values()), node.meta.get("source_fn_stack"),
            node.meta.get("stack_trace"), str(node.meta.get("val")),
            re.sub(r"graph_id=\d+", "", str(node.meta.get("from_node"))),  # ids differ run to run
        )
        for node in program.graph.nodes
    ]  # fmt: skip
    state = {name: tensor.tolist() for name, tensor in program.state_dict.items()}
    return program.graph_module.code, str(program.graph_signature), state, meta


@pytest.fixture
def guard_functions(monkeypatch: pytest.MonkeyPatch) -> list[tuple[list[str], str]]:
    """Every (checks, generated source) Dynamo's ``build_guard_function`` makes in the test."""
    built: list[tuple[list[str], str]] = []
    stock = dynamo_guards.build_guard_function

    def recording(code_parts: list[str], closure_args: str) -> tuple[str, str]:
        body, source = stock(code_parts, closure_args)
        built.append((list(code_parts), source))
        return body, source

    monkeypatch.setattr(dynamo_guards, "build_guard_function", recording)
    return built


def test_a_strict_export_gives_stocks_program() -> None:
    stock = _strict_export(_block(), torch.ones(2, 8))
    with EXPORT_GUARDS.scope():
        ours = _strict_export(_block(), torch.ones(2, 8))
    assert _program(ours) == _program(stock)


def test_an_exports_guard_function_holds_its_checks_without_hoisted_subexpressions(
    guard_functions: list[tuple[list[str], str]],
) -> None:
    _strict_export(_block(), torch.ones(2, 8))
    assert guard_functions and any("_var0 = " in source for _, source in guard_functions)  # stock hoists
    guard_functions.clear()
    with EXPORT_GUARDS.scope():
        _strict_export(_block(), torch.ones(2, 8))
    assert guard_functions
    for checks, source in guard_functions:
        assert "_var" not in source
        body = [line.strip() for line in source.splitlines() if line.strip().startswith("if not (")]
        assert body == [f"if not ({check}):" for check in checks]


def test_a_constraint_violation_raises_as_stock() -> None:
    shapes = {"x": {0: Dim("batch")}}
    with pytest.raises(Exception) as stock:
        _strict_export(_Specializing(), torch.randn(4, 3), dynamic_shapes=shapes)
    with EXPORT_GUARDS.scope(), pytest.raises(Exception) as ours:
        _strict_export(_Specializing(), torch.randn(4, 3), dynamic_shapes=shapes)
    assert type(ours.value) is type(stock.value)
    assert str(ours.value) == str(stock.value)


def test_guards_outside_an_export_keep_the_subexpression_pass() -> None:
    checks = ["L['m'].w.size()[0] == 2", "L['m'].w.size()[1] == 3"]

    def hoisted() -> list[tuple[list[str], str]]:
        cse = dynamo_guards.PyExprCSEPass()
        cse.count(checks)
        return [cse.replace(check) for check in checks]

    stock = hoisted()
    assert stock[0][0]  # the shared `L['m'].w.size()` is hoisted into a preface
    with EXPORT_GUARDS.scope():
        assert hoisted() == stock
