"""retrace_skip proven live: where it skips run_decompositions' re-trace, torch's own re-trace of the
same program gives the same graph code, node names, metadata (provenance roots), signature and
weights; where the re-trace would change something it is not skipped; the Arm lowering that
takes the skip gives stock's .pte bytes (also held by tests/arm/test_sameness.py)."""

from __future__ import annotations

from typing import Any

import pytest
import torch
from executorch.exir.program._program import _default_decomposition_table

from lowerkit import zoo
from lowerkit.pass_infra import _upstream
from lowerkit.pass_infra.local_decomposition import decompose_locally, trace_names
from lowerkit.pass_infra.retrace_skip import RETRACE_SKIP, needs_retrace, retrace_plan
from pass_infra.test_whole_lowering import _meta_mismatches


def _differences(stock: torch.export.ExportedProgram, fast: torch.export.ExportedProgram) -> list[str]:
    out = _meta_mismatches(stock.graph_module, fast.graph_module)  # provenance by its roots
    if str(stock.graph_signature) != str(fast.graph_signature):
        out.append("graph signature")
    if list(stock.state_dict) != list(fast.state_dict) or any(
        stock.state_dict[k] is not fast.state_dict[k] for k in stock.state_dict
    ):
        out.append("state dict")
    if list(stock.constants) != list(fast.constants):
        out.append("constants")
    return out


def _model(name: str) -> tuple[torch.nn.Module, tuple[Any, ...]]:
    if name == "sequential":  # its forward's argument is named `input`, a Python builtin
        return torch.nn.Sequential(torch.nn.Linear(8, 4), torch.nn.ReLU()), (torch.randn(1, 8),)
    model = zoo.get(name)
    return model.module(), model.example_inputs()


def _decomposed(name: str, times: int = 2) -> torch.export.ExportedProgram:
    """`name` exported and decomposed `times` times in scope: the first a real re-trace (it adds
    the metadata a trace records), the second (if any) skipped."""
    module, inputs = _model(name)
    program = torch.export.export(module.eval(), inputs)
    with RETRACE_SKIP.scope():
        assert needs_retrace(program, {}) == "not decomposed in this scope"
        for _ in range(times):
            program = program.run_decompositions({})  # remembered as decomposed
        return program


def _table_without_graph_ops(program: torch.export.ExportedProgram) -> dict[Any, Any]:
    ops = {n.target for n in program.graph.nodes if n.op == "call_function"}
    return {op: fn for op, fn in _default_decomposition_table().items() if op not in ops}


@pytest.mark.parametrize("times", [1, 2])
@pytest.mark.parametrize("name", ["conv_linear", "cnn9_layernorm", "sequential"])
def test_skipped_retrace_gives_what_the_retrace_gives(name: str, times: int) -> None:
    decomposed = _decomposed(name, times)
    for table in ({}, _table_without_graph_ops(decomposed)):
        with RETRACE_SKIP.scope():
            assert needs_retrace(decomposed, table) is None
            fast = decomposed.run_decompositions(table)
        stock = _upstream.STOCK_RUN_DECOMPOSITIONS(decomposed, table)
        assert fast is not decomposed and fast.graph_module is not decomposed.graph_module
        assert fast.graph_module.code == stock.graph_module.code
        assert [n.name for n in fast.graph.nodes] == [n.name for n in stock.graph.nodes]
        assert _differences(stock, fast) == []


def test_the_copy_is_independent_of_its_source() -> None:
    decomposed = _decomposed("cnn9_layernorm")
    code = decomposed.graph_module.code
    with RETRACE_SKIP.scope():
        fast = decomposed.run_decompositions({})
    relu = next(n for n in fast.graph.nodes if n.op == "call_function" and "relu" in str(n.target))
    relu.replace_all_uses_with(relu.args[0])
    fast.graph.erase_node(relu)
    fast.graph_module.recompile()
    assert decomposed.graph_module.code == code != fast.graph_module.code


def test_a_retrace_that_changes_something_is_not_skipped() -> None:
    decomposed = _decomposed("cnn9_layernorm")
    # The default table decomposes conv2d: a real re-trace, whose graph differs from the input's.
    table = _default_decomposition_table()
    assert needs_retrace(decomposed, table) == "aten.conv2d.default decomposes"
    with RETRACE_SKIP.scope():
        result = decomposed.run_decompositions(table)
    assert result.graph_module.code != decomposed.graph_module.code
    assert needs_retrace(decomposed, None) == "the default table"
    # A mutating op, or a dead node, makes the re-trace do work (functionalize, eliminate).
    node = next(n for n in decomposed.graph.nodes if n.target == torch.ops.aten.relu.default)
    node.target = torch.ops.aten.relu_.default
    assert needs_retrace(decomposed, {}) == "aten.relu_.default mutates"
    node.target = torch.ops.aten.relu.default
    with decomposed.graph.inserting_after(node):
        decomposed.graph.call_function(torch.ops.aten.neg.default, (node,))
    assert str(needs_retrace(decomposed, {})).startswith("dead node")


def test_arm_lowering_takes_the_skip_and_gives_stocks_program(monkeypatch: pytest.MonkeyPatch) -> None:
    """to_edge_transform_and_lower with Arm's partitioner inside accelerated_lowering() vs stock:
    of its three run_decompositions, the first re-traces, the second decomposes conv2d locally,
    the third is skipped; same lowered program, metadata and bytes."""
    from executorch.exir import to_edge_transform_and_lower

    from lowerkit.arm_passes.devices import compile_spec_for, partitioner_for
    from lowerkit.arm_passes.lowering import _convert
    from lowerkit.pass_infra import accelerated_lowering, retrace_skip
    model = zoo.get("resnet8")
    inputs = model.example_inputs()
    spec = compile_spec_for("TOSA-1.0+INT")
    converted = _convert(torch.export.export(model.module().eval(), inputs), inputs, spec, None, stock=True)
    program = torch.export.export(converted, inputs)
    taken: list[str] = []
    plan, local = retrace_skip.retrace_plan, retrace_skip.decompose_locally

    def counting_plan(program: Any, table: Any) -> tuple[str | None, list[Any]]:
        blocker, decomposing = plan(program, table)
        taken.append("re-trace" if blocker else "local" if decomposing else "skip")
        return blocker, decomposing

    def counting_local(*args: Any) -> Any:
        result = local(*args)
        taken.append("local done" if result is not None else "local refused")
        return result

    def lower() -> tuple[Any, bytes]:
        edge = to_edge_transform_and_lower(program, partitioner=[partitioner_for(spec)])
        return edge.exported_program(), bytes(edge.to_executorch().buffer)

    stock, stock_pte = lower()
    monkeypatch.setattr(retrace_skip, "retrace_plan", counting_plan)
    monkeypatch.setattr(retrace_skip, "decompose_locally", counting_local)
    with accelerated_lowering():
        fast, fast_pte = lower()
    assert taken == ["re-trace", "local", "local done", "skip"]
    assert fast.graph_module.code == stock.graph_module.code
    assert _meta_mismatches(stock.graph_module, fast.graph_module) == []
    assert fast_pte == stock_pte


class _Renamings(torch.nn.Module):
    """Names a local decomposition must shift: an input named like an op, an aten.convolution
    already in the graph before the conv2d that becomes one, a decomposed node as an output."""

    def __init__(self) -> None:
        super().__init__()
        self.first = torch.nn.Conv2d(3, 4, 3, padding=1)
        self.second = torch.nn.Conv2d(4, 4, 1)

    def forward(self, convolution: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        direct = torch.ops.aten.convolution.default(
            convolution, self.first.weight, self.first.bias, [1, 1], [1, 1], [1, 1], False, [0, 0], 1
        )
        return torch.relu(direct), self.second(direct)


@pytest.mark.parametrize("name", ["conv_linear", "sequential", "renamings"])
def test_local_decomposition_gives_what_the_retrace_gives(name: str) -> None:
    """Where some nodes decompose (conv2d, and linear in `sequential`), the local decomposition
    equals torch's whole re-trace (the quantized Arm lowering: the test above)."""
    if name == "renamings":
        program = torch.export.export(_Renamings().eval(), (torch.randn(1, 3, 8, 8),))
        with RETRACE_SKIP.scope():
            decomposed = program.run_decompositions({})
    else:
        decomposed = _decomposed(name, times=1)
    table = _default_decomposition_table()
    if name != "sequential":
        table.pop(torch.ops.aten.linear.default, None)
    blocker, decomposing = retrace_plan(decomposed, table)
    assert blocker is None and decomposing, (blocker, decomposing)
    stock = _upstream.STOCK_RUN_DECOMPOSITIONS(decomposed, table)
    fast = decompose_locally(decomposed, table, decomposing)
    assert fast is not None
    assert fast.graph_module.code == stock.graph_module.code
    assert [n.name for n in fast.graph.nodes] == [n.name for n in stock.graph.nodes]
    assert _differences(stock, fast) == []
    assert str(fast.module_call_graph) == str(stock.module_call_graph)
    assert list(decomposed.graph.nodes)[-1].args != list(fast.graph.nodes)[-1].args or name != "renamings"


def test_local_decomposition_refuses_multi_output_results() -> None:
    """layer_norm decomposes into native_layer_norm and a getitem: a trace names a getitem for
    each of its three outputs, so the whole re-trace runs (and run_decompositions still equals it)."""
    decomposed = _decomposed("cnn9_layernorm", times=1)
    table = _default_decomposition_table()
    _, decomposing = retrace_plan(decomposed, table)
    assert torch.ops.aten.layer_norm.default in {n.target for n in decomposing}
    assert decompose_locally(decomposed, table, decomposing) is None
    with RETRACE_SKIP.scope():
        fast = decomposed.run_decompositions(table)
    assert fast.graph_module.code == _upstream.STOCK_RUN_DECOMPOSITIONS(decomposed, table).graph_module.code


def test_local_decomposition_refuses_a_program_not_named_as_a_trace_names_it() -> None:
    decomposed = _decomposed("conv_linear", times=1)
    table = _default_decomposition_table()
    _, decomposing = retrace_plan(decomposed, table)
    assert trace_names(decomposed, decomposed.graph)[decomposing[0]] == decomposing[0].name
    decomposing[0].name = "renamed_by_hand"
    assert decompose_locally(decomposed, table, decomposing) is None


def test_scope_restores_run_decompositions() -> None:
    original = torch.export.ExportedProgram.__dict__["run_decompositions"]
    with RETRACE_SKIP.scope():
        assert torch.export.ExportedProgram.__dict__["run_decompositions"] is not original
    assert torch.export.ExportedProgram.__dict__["run_decompositions"] is original
