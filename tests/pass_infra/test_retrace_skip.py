"""retrace_skip and local_decomposition proven live: where run_decompositions does without its
whole-program re-trace, torch's own re-trace of the same program gives the same graph code, node
names, metadata (provenance roots), signature, module call graph and weights; where it cannot,
the re-trace runs; the Arm lowering that does without all three re-traces gives stock's .pte
bytes (also held by tests/arm/test_sameness.py)."""

from __future__ import annotations

import operator
from typing import Any

import pytest
import torch
from executorch.exir.program._program import _default_decomposition_table

from lowerkit import zoo
from lowerkit.pass_infra import _upstream
from lowerkit.pass_infra.accelerations.local_decomposition import (
    decompose_locally,
    last_refusal,
    trace_names,
)
from lowerkit.pass_infra.accelerations.retrace_skip import (
    RETRACE_SKIP,
    decomposition_fallbacks,
    needs_retrace,
    retrace_plan,
)
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


def _exported(name: str) -> torch.export.ExportedProgram:
    if name == "renamings":
        return torch.export.export(
            _Renamings().eval(), (torch.randn(1, 3, 8, 8), torch.randn(1, 4, 8, 8))
        )
    if name in _SMALL:
        torch.manual_seed(0)
        return torch.export.export(_SMALL[name]().eval(), (torch.randn(1, 3, 10, 10),))
    module, inputs = _model(name)
    return torch.export.export(module.eval(), inputs)


def _decomposed(name: str, times: int = 1) -> torch.export.ExportedProgram:
    """`name` exported and decomposed `times` times, by torch's own re-trace."""
    program = _exported(name)
    for _ in range(times):
        program = _upstream.STOCK_RUN_DECOMPOSITIONS(program, {})
    return program


def _lowering_decompositions(program: torch.export.ExportedProgram) -> list[torch.export.ExportedProgram]:
    """A lowering's three run_decompositions (``{}``, then ExecuTorch's table twice), each chained on
    torch's result: each must stay local and equal torch's re-trace. Torch's results, in order."""
    results = []
    for table in [{}, _default_decomposition_table(), _default_decomposition_table()]:
        with RETRACE_SKIP.scope(), decomposition_fallbacks() as fallbacks:
            fast = program.run_decompositions(table)
        assert fallbacks == []
        program = _upstream.STOCK_RUN_DECOMPOSITIONS(program, table)
        _assert_same(program, fast)
        results.append(program)
    return results


def _assert_same(stock: torch.export.ExportedProgram, fast: torch.export.ExportedProgram) -> None:
    assert fast.graph_module.code == stock.graph_module.code
    assert [n.name for n in fast.graph.nodes] == [n.name for n in stock.graph.nodes]
    assert _differences(stock, fast) == []
    assert str(fast.module_call_graph) == str(stock.module_call_graph)


class _Renamings(torch.nn.Module):
    """Names a local decomposition must shift: inputs named like ops, an aten.convolution already
    in the graph before the conv2d that becomes one, a decomposed node as an output, a reshape."""

    def __init__(self) -> None:
        super().__init__()
        self.first = torch.nn.Conv2d(3, 4, 3, padding=1)
        self.second = torch.nn.Conv2d(4, 4, 1)

    def forward(self, convolution: torch.Tensor, view: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        direct = torch.ops.aten.convolution.default(
            convolution, self.first.weight, self.first.bias, [1, 1], [1, 1], [1, 1], False, [0, 0], 1
        )
        return torch.relu(direct).reshape(1, -1), self.second(direct + view)


class _InPlace(torch.nn.Module):
    """In-place ops as torchvision's CNNs export them: conv + BatchNorm + ReLU(inplace) (relu_,
    resnet), conv + ReLU6(inplace) (hardtanh_, MobileNetV2), an in-place chain (add_ then relu_),
    Dropout(inplace) (dropout_, MobileNetV3); and a dead node."""

    def __init__(self) -> None:
        super().__init__()
        self.conv = torch.nn.Conv2d(3, 4, 3, padding=1)
        self.bn = torch.nn.BatchNorm2d(4)
        self.relu = torch.nn.ReLU(inplace=True)
        self.conv6 = torch.nn.Conv2d(4, 4, 1)
        self.relu6 = torch.nn.ReLU6(inplace=True)
        self.dropout = torch.nn.Dropout(inplace=True)  # dropout_: decomposed before functionalization

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = self.relu6(self.conv6(self.relu(self.bn(self.conv(x)))))
        x.mul(2.0)  # unused, as Hugging Face models leave some: a trace drops it
        return self.dropout(torch.relu_(y.add_(1.0)))


class _MaxPool(torch.nn.Module):
    """resnet's stem: conv + ReLU(inplace) + MaxPool2d (max_pool2d decomposes into the two-output
    max_pool2d_with_indices and a getitem of its first output; a trace names one for each)."""

    def __init__(self) -> None:
        super().__init__()
        self.conv = torch.nn.Conv2d(3, 4, 3)
        self.relu = torch.nn.ReLU(inplace=True)
        self.pool = torch.nn.MaxPool2d(3, stride=2, padding=1)
        self.head = torch.nn.Conv2d(4, 4, 1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.head(self.pool(self.relu(self.conv(x))))


class _Chunks(torch.nn.Module):
    """ShuffleNetV2's unit: chunk (split.Tensor, a multi-output view op that decomposes into
    getitems of its own), a branch, cat, and the channel shuffle (view, transpose, contiguous)."""

    def __init__(self) -> None:
        super().__init__()
        self.conv = torch.nn.Conv2d(3, 4, 1)
        self.branch = torch.nn.Sequential(torch.nn.Conv2d(2, 2, 3, padding=1), torch.nn.ReLU(inplace=True))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        left, right = self.conv(x).chunk(2, dim=1)
        out = torch.cat((left, self.branch(right)), dim=1)
        batch, channels, height, width = out.shape
        out = out.view(batch, 2, channels // 2, height, width).transpose(1, 2).contiguous()
        return out.view(batch, channels, height, width)


class _MutatesAView(torch.nn.Module):
    """relu_ on a tensor whose view was taken before: functionalization regenerates the view."""

    def __init__(self) -> None:
        super().__init__()
        self.conv = torch.nn.Conv2d(3, 4, 3)

    def forward(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        y = self.conv(x)
        flat = y.view(-1)
        return flat, torch.relu_(y)


class _ViewsAnInPlaceResult(torch.nn.Module):
    """ConvNeXt's block end: ``x += shortcut`` (add_ on an intermediate), then LayerNorm2d's
    permute of the result. A trace records that view again where a non-view first reads it, with
    that reader's provenance, which a local decomposition does not reproduce."""

    def __init__(self) -> None:
        super().__init__()
        self.conv = torch.nn.Conv2d(3, 3, 3, padding=1)
        self.norm = torch.nn.LayerNorm(3)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = self.conv(x) * 2.0
        y += x
        return self.norm(y.permute(0, 2, 3, 1))


class _Casts(torch.nn.Module):
    """Hugging Face attention's casts: ``softmax(..., dtype=float32).to(query.dtype)``,
    ``.to(dtype)`` and ``type_as``. Export puts an ``_assert_tensor_metadata`` (no value, no
    users, ``dtype=`` as a keyword) before each ``.to``; a trace keeps it, named after the operator,
    with its arguments as the dispatcher gives them and no ``val``."""

    def __init__(self) -> None:
        super().__init__()
        self.conv = torch.nn.Conv2d(3, 4, 1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = self.conv(x).to(torch.float32)
        weights = torch.softmax(y, dim=-1, dtype=torch.float32).to(x.dtype)
        return (weights.type_as(x) * y).reshape(1, -1)


_SMALL: dict[str, type[torch.nn.Module]] = {
    "in_place": _InPlace,
    "max_pool": _MaxPool,
    "chunks": _Chunks,
    "mutates_a_view": _MutatesAView,
    "views_an_in_place_result": _ViewsAnInPlaceResult,
    "casts": _Casts,
}


@pytest.mark.parametrize("name", ["in_place", "max_pool", "chunks"])
def test_in_place_and_multi_output_decompositions_stay_local_and_give_what_the_retrace_gives(
    name: str,
) -> None:
    """Each of the three run_decompositions a lowering makes (functionalize the export, decompose
    by ExecuTorch's default table, once more on the result), done locally, equals torch's re-trace
    of the same program: in-place ops become their functional ops, multi-output decompositions
    (batch_norm, max_pool2d) give the getitems a trace names, as does a multi-output op that
    decomposes (chunk's split); programs holding those getitems decompose again."""
    program = _exported(name)
    # conv2d is CompositeImplicitAutograd, which run_decompositions keeps unless its table has it:
    # recorded as a trace records it, not re-traced; batch_norm it does not keep.
    _, decomposing = retrace_plan(program, {})
    assert torch.ops.aten.conv2d.default not in {n.target for n in decomposing}
    if name == "in_place":
        assert any(not n.users for n in program.graph.nodes if n.op == "call_function")
    program = _lowering_decompositions(program)[-1]
    targets = {n.target for n in program.graph.nodes}
    assert not any(
        _upstream.is_mutating(t) for t in targets if isinstance(t, torch._ops.OpOverload)
    )
    assert operator.getitem in targets


def test_calls_that_return_nothing_stay_local_and_give_what_the_retrace_gives() -> None:
    """``_assert_tensor_metadata`` (export's, for ``.to(dtype)``) has no value: the three
    run_decompositions of a lowering stay local and equal torch's re-trace (name, arguments,
    metadata without ``val``), the op kept each time."""
    program = _exported("casts")
    assert_metadata = torch.ops.aten._assert_tensor_metadata.default
    assert any(n.target is assert_metadata and n.meta["val"] is None for n in program.graph.nodes)
    for stock in _lowering_decompositions(program):
        assert any(n.target is assert_metadata for n in stock.graph.nodes)


def test_mutating_a_viewed_tensor_takes_the_stock_retrace() -> None:
    _assert_takes_the_stock_retrace(
        _exported("mutates_a_view"), "aten.relu_.default mutates conv2d, of which view is a view"
    )


def test_a_view_of_an_in_place_results_takes_the_stock_retrace() -> None:
    _assert_takes_the_stock_retrace(
        _exported("views_an_in_place_result"),
        "aten.add_.Tensor's result add_ has a view (permute), which a trace records where it is read",
    )


def _assert_takes_the_stock_retrace(program: torch.export.ExportedProgram, reason: str) -> None:
    """`program`'s run_decompositions({}) falls back for `reason`, says so, and gives torch's re-trace."""
    assert needs_retrace(program, {}) == reason
    with RETRACE_SKIP.scope(), decomposition_fallbacks() as fallbacks:
        fast = program.run_decompositions({})
    assert [f.reason for f in fallbacks] == [reason]
    _assert_same(_upstream.STOCK_RUN_DECOMPOSITIONS(program, {}), fast)


@pytest.mark.parametrize("name", ["conv_linear", "cnn9_layernorm", "sequential", "renamings"])
def test_first_decomposition_gives_what_the_retrace_gives(name: str) -> None:
    """The first run_decompositions after torch.export (functionalize: reshapes become views, and
    every node gains the metadata a trace records), re-tracing only the nodes that may change."""
    program = _exported(name)
    assert needs_retrace(program, {}) is None
    with RETRACE_SKIP.scope():
        fast = program.run_decompositions({})
    _assert_same(_upstream.STOCK_RUN_DECOMPOSITIONS(program, {}), fast)


def _table_without_graph_ops(program: torch.export.ExportedProgram) -> dict[Any, Any]:
    ops = {n.target for n in program.graph.nodes if n.op == "call_function"}
    return {op: fn for op, fn in _default_decomposition_table().items() if op not in ops}


@pytest.mark.parametrize("times", [1, 2])
@pytest.mark.parametrize("name", ["conv_linear", "cnn9_layernorm", "sequential"])
def test_a_retrace_with_nothing_to_decompose_gives_what_the_retrace_gives(name: str, times: int) -> None:
    decomposed = _decomposed(name, times)
    for table in ({}, _table_without_graph_ops(decomposed)):
        with RETRACE_SKIP.scope():
            assert needs_retrace(decomposed, table) is None
            fast = decomposed.run_decompositions(table)
        assert fast is not decomposed and fast.graph_module is not decomposed.graph_module
        _assert_same(_upstream.STOCK_RUN_DECOMPOSITIONS(decomposed, table), fast)


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
    # Lowering removes delegated weights from its program's state dict: never from the source's.
    weights = list(decomposed.state_dict)
    del fast.state_dict[weights[0]]
    assert list(decomposed.state_dict) == weights


def _relu_of_no_view(program: torch.export.ExportedProgram) -> torch.fx.Node:
    """A relu whose input is no view (relu_ on a view takes the stock re-trace)."""
    return next(
        n for n in program.graph.nodes
        if n.target == torch.ops.aten.relu.default and not _upstream.returns_alias(n.args[0].target)
    )  # fmt: skip


def _read_after_mutation(
    program: torch.export.ExportedProgram, node: torch.fx.Node
) -> tuple[torch.fx.Node, torch.fx.Node]:
    """Make `node`'s users read ``node + its first argument`` (that argument read after `node`): (the add, the argument)."""
    mutated = node.args[0]
    assert isinstance(mutated, torch.fx.Node)
    with program.graph.inserting_after(node):
        later = program.graph.call_function(torch.ops.aten.add.Tensor, (node, mutated))
    later.meta["val"] = node.meta["val"]
    node.replace_all_uses_with(later, delete_user_cb=lambda user: user is not later)
    return later, mutated


def test_what_a_local_decomposition_cannot_take_is_re_traced() -> None:
    decomposed = _decomposed("cnn9_layernorm")
    assert needs_retrace(decomposed, None) == "the default table"
    # A mutated tensor read after the mutation makes the re-trace do work (functionalize).
    decomposed = _decomposed("max_pool")
    node = _relu_of_no_view(decomposed)
    node.target = torch.ops.aten.relu_.default
    assert needs_retrace(decomposed, {}) is None  # its result is the only reader afterwards
    later, mutated = _read_after_mutation(decomposed, node)
    assert (
        needs_retrace(decomposed, {})
        == f"aten.relu_.default mutates {mutated.name}, which {later.name} reads afterwards"
    )
    later.replace_all_uses_with(node)
    decomposed.graph.erase_node(later)
    node.target = torch.ops.aten.relu.default
    # A dead node the re-trace drops (after naming it): dropped the same way.
    with decomposed.graph.inserting_after(node):
        dead = decomposed.graph.create_node("call_function", torch.ops.aten.neg.default, (node,), name="neg")
    dead.meta["val"] = node.meta["val"]
    with RETRACE_SKIP.scope(), decomposition_fallbacks() as fallbacks:
        fast = decomposed.run_decompositions({})
    assert fallbacks == []
    _assert_same(_upstream.STOCK_RUN_DECOMPOSITIONS(decomposed, {}), fast)


def test_arm_lowering_takes_the_skip_and_gives_stocks_program(monkeypatch: pytest.MonkeyPatch) -> None:
    """to_edge_transform_and_lower with Arm's partitioner inside accelerated_lowering() vs stock:
    its three run_decompositions (reshapes to views, conv2d to convolution, nothing) all done
    locally; same lowered program, metadata and bytes."""
    from executorch.exir import to_edge_transform_and_lower

    from lowerkit.arm_passes.devices import compile_spec_for, partitioner_for
    from lowerkit.arm_passes.lowering import fake_quantize
    from lowerkit.pass_infra import accelerated_lowering
    from lowerkit.pass_infra.accelerations import retrace_skip

    model = zoo.get("resnet8")
    inputs = model.example_inputs()
    spec = compile_spec_for("TOSA-1.0+INT")
    converted = fake_quantize(torch.export.export(model.module().eval(), inputs), inputs, spec, None, stock=True)
    program = torch.export.export(converted, inputs)
    taken: list[str] = []
    local = retrace_skip.decompose_locally

    def counting_local(*args: Any) -> Any:
        result = local(*args)
        taken.append("local" if result is not None else "refused")
        return result

    def lower() -> tuple[Any, bytes]:
        edge = to_edge_transform_and_lower(program, partitioner=[partitioner_for(spec)])
        return edge.exported_program(), bytes(edge.to_executorch().buffer)

    weights = list(program.state_dict)
    stock, stock_pte = lower()
    monkeypatch.setattr(retrace_skip, "decompose_locally", counting_local)
    with accelerated_lowering():
        fast, fast_pte = lower()
    assert taken == ["local", "local", "local"]
    assert list(program.state_dict) == weights  # the caller's program keeps its weights
    assert fast.graph_module.code == stock.graph_module.code
    assert _meta_mismatches(stock.graph_module, fast.graph_module) == []
    assert fast_pte == stock_pte


@pytest.mark.parametrize("name", ["conv_linear", "sequential", "renamings"])
def test_local_decomposition_gives_what_the_retrace_gives(name: str) -> None:
    """Where some nodes decompose (conv2d, and linear in `sequential`), the local decomposition
    equals torch's whole re-trace (the quantized Arm lowering: the test above)."""
    decomposed = _decomposed(name)
    table = _default_decomposition_table()
    if name != "sequential":
        table.pop(torch.ops.aten.linear.default, None)
    blocker, decomposing = retrace_plan(decomposed, table)
    assert blocker is None and decomposing, (blocker, decomposing)
    fast = decompose_locally(decomposed, table, decomposing)
    assert fast is not None
    _assert_same(_upstream.STOCK_RUN_DECOMPOSITIONS(decomposed, table), fast)


def test_multi_output_decomposition_is_local() -> None:
    """layer_norm decomposes into native_layer_norm and a getitem: a trace names a getitem for
    each of its three outputs and drops the two unused, which the local decomposition's names follow."""
    decomposed = _decomposed("cnn9_layernorm")
    table = _default_decomposition_table()
    _, decomposing = retrace_plan(decomposed, table)
    assert torch.ops.aten.layer_norm.default in {n.target for n in decomposing}
    fast = decompose_locally(decomposed, table, decomposing)
    assert fast is not None, last_refusal()
    assert torch.ops.aten.native_layer_norm.default in {n.target for n in fast.graph.nodes}
    _assert_same(_upstream.STOCK_RUN_DECOMPOSITIONS(decomposed, table), fast)


def test_every_whole_re_trace_says_why() -> None:
    """decomposition_fallbacks() gets each fallback with its reason; a local one adds nothing."""
    decomposed = _decomposed("max_pool")
    node = _relu_of_no_view(decomposed)
    with RETRACE_SKIP.scope(), decomposition_fallbacks() as fallbacks:
        decomposed.run_decompositions({})
        assert fallbacks == []
        node.target = torch.ops.aten.relu_.default
        later, mutated = _read_after_mutation(decomposed, node)
        decomposed.run_decompositions({})
    assert [f.reason for f in fallbacks] == [
        f"aten.relu_.default mutates {mutated.name}, which {later.name} reads afterwards"
    ]


class _WeightTypeAs(torch.nn.Module):
    """An RMSNorm as ExecuTorch's Llama writes it: the weight cast to the input's dtype."""

    def __init__(self) -> None:
        super().__init__()
        self.weight = torch.nn.Parameter(torch.ones(8))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        normed = x.float() * torch.rsqrt(x.float().pow(2).mean(-1, keepdim=True) + 1e-5)
        return normed.type_as(x) * self.weight.type_as(x)


@pytest.mark.parametrize("strict", [True, False])
def test_a_kept_call_returning_its_input_records_the_inputs_requires_grad(strict: bool) -> None:
    """``weight.type_as(x)`` of the same dtype gives the parameter back: the re-trace's
    ``tensor_meta`` says ``requires_grad=True`` there (the first ``run_decompositions`` of
    ``export_llama``, which exports under ``no_grad``), and the local decomposition's too."""
    with torch.no_grad():
        program = torch.export.export(_WeightTypeAs().eval(), (torch.randn(2, 8),), strict=strict)
    with RETRACE_SKIP.scope(), decomposition_fallbacks() as fallbacks:
        fast = program.run_decompositions({})
    assert fallbacks == []
    stock = _upstream.STOCK_RUN_DECOMPOSITIONS(program, {})
    _assert_same(stock, fast)
    weight_cast = next(n for n in stock.graph.nodes if n.op == "call_function" and n.args[0].name == "p_weight")
    assert weight_cast.meta["tensor_meta"].requires_grad  # what the test is about


class _WithConstant(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.offset = torch.ones(4)  # neither parameter nor buffer: a lifted tensor constant

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return (x + self.offset).reshape(2, 2)


def test_a_first_trace_with_lifted_constants_takes_the_stock_retrace() -> None:
    program = torch.export.export(_WithConstant(), (torch.randn(4),))
    assert (
        needs_retrace(program, {})
        == "constants, custom objects or tokens in a program not traced yet"
    )
    with RETRACE_SKIP.scope():
        fast = program.run_decompositions({})
    _assert_same(_upstream.STOCK_RUN_DECOMPOSITIONS(program, {}), fast)


def test_local_decomposition_refuses_a_program_not_named_as_a_trace_names_it() -> None:
    decomposed = _decomposed("conv_linear")
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


class _Attention(torch.nn.Module):
    """The views of an attention block: view, transpose, permute, expand (and a reshape)."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        q = x.view(1, 6, 2, 4).transpose(1, 2)
        k = x.view(1, 6, 2, 4).permute(0, 2, 3, 1)
        a = torch.matmul(q, k).softmax(-1)
        return (a @ q).transpose(1, 2).reshape(1, 6, 8).unsqueeze(0).expand(2, 1, 6, 8)


def _is_view(node: torch.fx.Node) -> bool:
    schema = getattr(node.target, "_schema", None)
    return schema is not None and any(r.alias_info is not None for r in schema.returns)


@pytest.mark.parametrize("traces", [0, 2])
def test_views_stay_out_of_the_re_trace(traces: int) -> None:
    """Functionalization records a view as that view again, whether torch.export just recorded it
    (0 traces) or a trace did: the views are not re-traced, and the result is still torch's whole
    re-trace."""
    traced = torch.export.export(_Attention(), (torch.randn(1, 6, 8),))
    for _ in range(traces):
        traced = _upstream.STOCK_RUN_DECOMPOSITIONS(traced, {})
    # reshape is CompositeImplicitAutograd: a trace records view (or clone + _unsafe_view) for it
    views = [
        n for n in traced.graph.nodes
        if n.op == "call_function" and _is_view(n) and not _upstream.has_cia_kernel(n.target)
    ]
    table: dict[Any, Any] = {}  # the views' own rule, not a table's
    blocker, decomposing = retrace_plan(traced, table)
    assert blocker is None and len(views) >= 6
    assert not set(views) & set(decomposing), [n.name for n in decomposing]
    with RETRACE_SKIP.scope():
        fast = traced.run_decompositions(table)
    _assert_same(_upstream.STOCK_RUN_DECOMPOSITIONS(traced, table), fast)


class _NoGradRotary(torch.nn.Module):
    """Hugging Face's rotary embedding: a ``@torch.no_grad()`` method, which export makes a
    ``wrap_with_set_grad_enabled`` call of a nested graph (a buffer among its inputs, ``.to(dtype)``
    casts whose ``_assert_tensor_metadata`` a trace keeps, two outputs); and an autocast-disabled
    block (``wrap_with_autocast``)."""

    def __init__(self) -> None:
        super().__init__()
        self.register_buffer("inv_freq", 1.0 / (10000 ** (torch.arange(0, 8, 2).float() / 8)), persistent=False)
        self.proj = torch.nn.Linear(8, 8)

    @torch.no_grad()
    def rotary(self, x: torch.Tensor, positions: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        freqs = positions[..., None].float() * self.inv_freq.to(dtype=torch.float)
        emb = torch.cat((freqs, freqs), dim=-1)
        return emb.cos().to(dtype=x.dtype), emb.sin().to(dtype=x.dtype)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        cos, sin = self.rotary(x, torch.arange(x.shape[1]).unsqueeze(0))
        with torch.autocast(device_type="cpu", enabled=False):
            y = self.proj(x).float()
        return y * cos + y.transpose(-1, -2).transpose(-1, -2) * sin


def test_nested_graphs_a_trace_inlines_stay_local_and_give_what_the_retrace_gives() -> None:
    """The calls a trace inlines go into the small program with their nested graphs; the result
    has none, and each of a lowering's three run_decompositions equals torch's re-trace."""
    program = torch.export.export(_NoGradRotary().eval(), (torch.randn(1, 4, 8),))
    calls = {n.target for n in program.graph.nodes if isinstance(n.target, torch._ops.HigherOrderOperator)}
    assert {c.name() for c in calls} == {"wrap_with_set_grad_enabled", "wrap_with_autocast"}
    _, decomposing = retrace_plan(program, {})
    assert calls <= {n.target for n in decomposing}
    first = _lowering_decompositions(program)[0]
    assert not any(True for _ in first.graph_module.named_children())
    assert torch.ops.aten._assert_tensor_metadata.default in {n.target for n in first.graph.nodes}


class _Branches(torch.nn.Module):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.cond(x.sum() > 0, lambda t: t.reshape(-1).relu(), lambda t: t.reshape(-1).neg(), (x,))


def test_nested_graphs_a_trace_keeps_take_the_stock_retrace() -> None:
    _assert_takes_the_stock_retrace(
        torch.export.export(_Branches(), (torch.randn(2, 2),)),
        "nested graphs a trace keeps (false_graph_0, true_graph_0)",
    )
