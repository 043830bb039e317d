"""COMPILED_CODE: torch.fx compiles each distinct generated source once; code objects equal stock's."""

from __future__ import annotations

import linecache
from typing import Any

import pytest
import torch

from lowerkit.pass_infra.accelerations import compiled_code
from lowerkit.pass_infra.accelerations.compiled_code import COMPILED_CODE, compiled


def _graph_module() -> torch.fx.GraphModule:
    class Net(torch.nn.Module):
        def forward(self, x: torch.Tensor) -> torch.Tensor:
            return torch.relu(x * 2).sum(dim=0)

    return torch.fx.symbolic_trace(Net())


def _codes(code: Any) -> list[Any]:
    nested = [c for c in code.co_consts if hasattr(c, "co_filename")]
    return [code, *(n for c in nested for n in _codes(c))]


def test_a_cached_source_gives_the_code_object_compile_gives() -> None:
    src = _graph_module().code
    first = compiled(src, "<eval_with_key>.a")
    again = compiled(src, "<eval_with_key>.b")
    stock = compile(src, "<eval_with_key>.b", "exec", dont_inherit=True)
    assert again == stock
    for ours, theirs in zip(_codes(again), _codes(stock), strict=True):
        assert ours.co_filename == theirs.co_filename == "<eval_with_key>.b"
        assert (ours.co_code, ours.co_firstlineno, ours.co_linetable) == (
            theirs.co_code, theirs.co_firstlineno, theirs.co_linetable,
        )
    assert first.co_filename == "<eval_with_key>.a"
    compiled_code._forget()


def test_a_graph_recompiled_unchanged_is_compiled_once(monkeypatch: pytest.MonkeyPatch) -> None:
    gm = _graph_module()
    calls: list[str] = []

    def counting(src: str, filename: str, mode: str, dont_inherit: bool = False) -> Any:
        calls.append(filename)
        return compile(src, filename, mode, dont_inherit=dont_inherit)

    monkeypatch.setattr(compiled_code, "compile", counting, raising=False)
    x = torch.randn(3, 4)
    with COMPILED_CODE.scope():
        gm.recompile()
        gm.recompile()
        gm.recompile()
        assert torch.equal(gm(x), torch.relu(x * 2).sum(dim=0))
        filename = gm.forward.__code__.co_filename
    assert len(calls) == 1
    assert filename != calls[0] and "".join(linecache.getlines(filename)).strip() == gm.code.strip()  # own key
    assert not compiled_code._codes  # emptied when the scope closed


def test_the_cache_keeps_the_most_recent_sources_only(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(compiled_code, "CACHED_SOURCES", 2)
    for i in range(4):
        compiled(f"x = {i}\n", f"<k{i}>")
    assert list(compiled_code._codes) == ["x = 2\n", "x = 3\n"]
    compiled_code._forget()


def test_an_error_in_recompiled_code_is_traced_to_its_source_line(capsys: pytest.CaptureFixture[str]) -> None:
    """GraphModule's call wrapper finds the failing line of the generated code through linecache."""
    gm = _graph_module()
    with COMPILED_CODE.scope():
        gm.recompile()
        gm.recompile()
        with pytest.raises(TypeError):
            gm("not a tensor")
    assert "relu = torch.relu(mul)" in capsys.readouterr().err
