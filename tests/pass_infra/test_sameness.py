"""pass-infra on the zoo: real ExecuTorch passes (exir and Arm, targets by discovery) give
the same graphs and metadata through PassPipeline as through the stock ExportPass path."""

from __future__ import annotations

import contextlib
from typing import Any

import pytest
import torch
from executorch.backends.arm._passes import (
    ConvertSqueezesToViewPass,
    ConvertToClampPass,
    DecomposeAdaptiveAvgPool2dPass,
    DecomposeAvgPool2dPass,
    DecomposeDivPass,
    DecomposeGeluPass,
    DecomposeGroupedConvPass,
    DecomposeLayerNormPass,
    DecomposeLinearPass,
    DecomposeMaxPool2dPass,
    DecomposeSelectPass,
    DecomposeSoftmaxPass,
    DecomposeSqrtPass,
    DecomposeSumPass,
    DecomposeVarPass,
    RemoveNoopPass,
    RewriteAvgPool2dPass,
    RewriteMaxPool2dPass,
)
from executorch.exir import to_edge
from executorch.exir.passes.remove_mixed_type_operators import RemoveMixedTypeOperators
from executorch.exir.passes.scalar_to_tensor_pass import ScalarToTensorPass
from torch.fx.passes.infra.pass_manager import PassManager

from bench.pass_infra import arm_tfa_passes
from lowerkit import zoo
from lowerkit.pass_infra import (
    PassPipeline,
    accelerated_quantization,
    as_targeted,
    discover_targeted_ops,
    first_difference,
)
from pass_infra.conftest import copies, meta_mismatches

EDGE_PASSES = (
    RemoveMixedTypeOperators,
    ScalarToTensorPass,
    ConvertToClampPass,
    DecomposeLayerNormPass,
    DecomposeVarPass,
    DecomposeSoftmaxPass,
    DecomposeGeluPass,
    DecomposeDivPass,
    DecomposeSqrtPass,
    DecomposeSumPass,
    DecomposeLinearPass,
    DecomposeGroupedConvPass,
    DecomposeAdaptiveAvgPool2dPass,
    DecomposeAvgPool2dPass,
    RewriteAvgPool2dPass,
    DecomposeMaxPool2dPass,
    RewriteMaxPool2dPass,
    ConvertSqueezesToViewPass,
    DecomposeSelectPass,
    RemoveNoopPass,
)


def _fast(passes: list[Any]) -> list[Any]:
    return [as_targeted(p) if discover_targeted_ops(p) else p for p in passes]


def _edge_graph(name: str) -> torch.fx.GraphModule:
    model = zoo.get(name)
    program = torch.export.export(model.module(), model.example_inputs())
    return to_edge(program).exported_program().graph_module


@pytest.mark.parametrize("name", zoo.names())
def test_edge_passes_match_stock_on_zoo_edge_graphs(name):
    stock_in, ours_in = copies(_edge_graph(name), 2)
    stock = PassManager([cls() for cls in EDGE_PASSES])(stock_in).graph_module
    ours, report = PassPipeline(_fast([cls() for cls in EDGE_PASSES])).run(ours_in)
    assert len(report.rows) == len(EDGE_PASSES) >= 20
    # The discovery-driven fast paths really were exercised.
    assert sum(discover_targeted_ops(cls) is not None for cls in EDGE_PASSES) >= 15
    assert any(not r.ran for r in report.rows)
    assert first_difference(stock, ours) is None
    assert ours.code == stock.code
    assert meta_mismatches(stock, ours) == []


def _arm_models() -> list[str]:
    return [n for n in zoo.names() if "arm" in zoo.get(n).backends]


@pytest.mark.parametrize("name", _arm_models())
def test_arm_annotation_pipeline_matches_stock(name):
    model = zoo.get(name)
    base = torch.export.export(model.module(), model.example_inputs()).module(check_guards=False)
    stock_in, ours_in = copies(base, 2)
    stock = PassManager(arm_tfa_passes(stock_in))(stock_in).graph_module
    passes = _fast(arm_tfa_passes(ours_in))
    assert len(passes) >= 20
    ours, report = PassPipeline(passes).run(ours_in)
    assert sum(r.ran for r in report.rows) < len(report.rows)
    assert first_difference(stock, ours) is None
    assert ours.code == stock.code
    assert meta_mismatches(stock, ours) == []
    # Same numbers too: the graphs compute the same function.
    inputs = model.example_inputs()
    torch.testing.assert_close(ours(*inputs), stock(*inputs), rtol=0, atol=0)


def test_verify_mode_accepts_the_real_arm_annotation_pipeline():
    model = zoo.get("conv_linear")
    base = torch.export.export(model.module(), model.example_inputs()).module(check_guards=False)
    (graph,) = copies(base, 1)
    _out, report = PassPipeline(_fast(arm_tfa_passes(graph)), verify=True).run(graph)
    assert all(r.verified for r in report.rows)


#: On q/dq graphs before ArmPassManager's folding, the pooling decompositions / rewrites
#: to TOSA ops reject float inputs (stock does too); the rest of EDGE_PASSES apply.
QUANTIZED_EDGE_PASSES = tuple(
    cls
    for cls in EDGE_PASSES
    if cls
    not in (
        DecomposeAdaptiveAvgPool2dPass,
        DecomposeAvgPool2dPass,
        RewriteAvgPool2dPass,
        DecomposeMaxPool2dPass,
        RewriteMaxPool2dPass,
    )
)


def _quantized_edge_graph(name: str) -> torch.fx.GraphModule:
    from executorch.backends.arm.quantizer import (
        TOSAQuantizer,
        get_symmetric_quantization_config,
    )
    from executorch.backends.arm.tosa.compile_spec import TosaCompileSpec
    from torchao.quantization.pt2e.quantize_pt2e import convert_pt2e, prepare_pt2e

    model = zoo.get(name)
    inputs = model.example_inputs()
    module = torch.export.export(model.module(), inputs).module(check_guards=False)
    quantizer = TOSAQuantizer(TosaCompileSpec("TOSA-1.0+INT"))
    quantizer.set_global(get_symmetric_quantization_config())
    prepared = prepare_pt2e(module, quantizer)
    with torch.no_grad():
        for sample in model.calibration(2, 0):
            prepared(*sample)
    converted = convert_pt2e(prepared)
    return to_edge(torch.export.export(converted, inputs)).exported_program().graph_module


@pytest.mark.parametrize("name", ["conv_linear", "cnn9_layernorm"])
def test_edge_passes_match_stock_on_arm_quantized_edge_graphs(name):
    graph = _quantized_edge_graph(name)
    targets = {str(n.target) for n in graph.graph.nodes if n.op == "call_function"}
    assert any("quantized_decomposed" in t for t in targets)  # the wider cache is exercised
    from executorch.backends.arm.tosa.specification import (
        TosaLoweringContext,
        TosaSpecification,
    )

    spec = TosaSpecification.create_from_string("TOSA-1.0+INT")
    stock_in, ours_in = copies(graph, 2)
    with TosaLoweringContext(spec):  # as ArmPassManager runs its passes
        stock = PassManager([cls() for cls in QUANTIZED_EDGE_PASSES])(stock_in).graph_module
        ours, _ = PassPipeline(_fast([cls() for cls in QUANTIZED_EDGE_PASSES])).run(ours_in)
    assert first_difference(stock, ours) is None
    assert ours.code == stock.code
    assert meta_mismatches(stock, ours) == []


def _quantized(name: str, accelerated: bool) -> tuple[torch.fx.GraphModule, torch.fx.GraphModule, torch.fx.GraphModule]:
    """(the exported module after prepare_pt2e, the prepared module, the converted one): Arm TOSA INT."""
    from torchao.quantization.pt2e.quantize_pt2e import convert_pt2e, prepare_pt2e

    from lowerkit.arm_passes.devices import compile_spec_for, quantizer_for

    model = zoo.get(name)
    module = torch.export.export(model.module(), model.example_inputs()).module(check_guards=False)
    quantizer = quantizer_for(compile_spec_for("TOSA-1.0+INT"))
    with accelerated_quantization() if accelerated else contextlib.nullcontext():
        prepared = prepare_pt2e(module, quantizer)
        with torch.no_grad():
            for batch in model.calibration(2, 0):
                prepared(*batch)
        return module, prepared, convert_pt2e(prepared)


@pytest.mark.parametrize("name", ["cnn9_layernorm", "mobilenet_v1_025"])
def test_accelerated_quantization_gives_stocks_modules(name):
    stock, ours = _quantized(name, accelerated=False), _quantized(name, accelerated=True)
    for a, b in zip(stock, ours, strict=True):
        # The same kind of object (prepare_pt2e also edits the module it is given), code, graph.
        assert type(b).__bases__ == type(a).__bases__ and type(b).__name__ == type(a).__name__
        assert [type(m).__bases__ for m in b.modules()] == [type(m).__bases__ for m in a.modules()]
        assert b.code == a.code
        assert first_difference(a, b) is None
        assert meta_mismatches(a, b) == []
        state_a, state_b = a.state_dict(), b.state_dict()
        assert list(state_b) == list(state_a)
        assert all(torch.equal(state_a[k], state_b[k]) for k in state_a)
