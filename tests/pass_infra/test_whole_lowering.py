"""accelerated_lowering() proven live: stock ExecuTorch and the accelerated scope lower the same
zoo models in this process, and the lowered programs (graph code, node metadata, delegate
payloads) and the .pte bytes are compared; every patched function is the original afterwards.

CI lowers the cheapest zoo CNNs plus a bilinear-upsample model (whose XNNPACK pattern does
match, so the no-skip path is proven too); ``LOWERKIT_WHOLE_LOWERING_MODELS=all`` (or a comma
list) runs every zoo CNN. ``python -m bench.whole_lowering`` checks the bytes of all of them.
"""

from __future__ import annotations

import contextlib
import io
import os
from typing import Any

import pytest
import torch
from executorch.backends.xnnpack.partition.xnnpack_partitioner import XnnpackPartitioner
from executorch.exir import to_edge_transform_and_lower
from executorch.exir.lowered_backend_module import LoweredBackendModule

from lowerkit import zoo
from lowerkit.pass_infra import _upstream, accelerated_lowering
from lowerkit.pass_infra.accelerations.deferred_lowering import handed_back_graph_modules
from lowerkit.pass_infra.accelerations.pattern_skip import cannot_match, pattern_passes
from pass_infra.conftest import meta_mismatches

ZOO_CNNS = ("conv_linear", "cnn9_layernorm", "resnet8", "mobilenet_v1_025", "ds_cnn")
CI_MODELS = ("conv_linear", "cnn9_layernorm")


def _models() -> tuple[str, ...]:
    wanted = os.environ.get("LOWERKIT_WHOLE_LOWERING_MODELS", "")
    if wanted == "all":
        return ZOO_CNNS
    return tuple(wanted.split(",")) if wanted else CI_MODELS


class Upsample(torch.nn.Module):
    """conv + bilinear upsample: XNNPACK's ConvertToUpsampleBilinear2d pattern matches it."""

    def __init__(self) -> None:
        super().__init__()
        self.conv = torch.nn.Conv2d(3, 4, 3, padding=1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        up = torch.nn.functional.interpolate(
            self.conv(x), scale_factor=2, mode="bilinear", align_corners=False
        )
        return torch.relu(up)


def _program(name: str) -> Any:
    if name == "upsample":
        torch.manual_seed(0)
        return torch.export.export(Upsample().eval(), (torch.rand(1, 3, 8, 8),))
    model = zoo.get(name)
    return torch.export.export(model.module().eval(), model.example_inputs())


def _lower(name: str) -> tuple[Any, bytes]:
    edge = to_edge_transform_and_lower(_program(name), partitioner=[XnnpackPartitioner()])
    return edge.exported_program(), bytes(edge.to_executorch().buffer)


@pytest.fixture(scope="module")
def lowerings() -> dict[str, tuple[tuple[Any, bytes], tuple[Any, bytes]]]:
    """{model: (stock lowering, accelerated lowering)}; stock first (it pays one-time costs)."""
    out = {}
    for name in (*_models(), "upsample"):
        stock = _lower(name)
        with accelerated_lowering():
            fast = _lower(name)
        out[name] = (stock, fast)
    return out


def _meta_mismatches(stock: Any, fast: Any) -> list[str]:
    """conftest's meta comparison; TensorSpec (no __eq__) and original_aten by repr; provenance
    by its roots (a re-trace that ``retrace_skip`` saves would have added two layers to each
    ``from_node`` chain; ExecuTorch's debug handles come from the roots).

    ``original_aten`` holds op objects that ExecuTorch deep-copies with the metadata, so two
    stock lowerings differ there too (equal names, distinct objects).
    """
    by_repr = ("spec", "original_aten")
    out = [
        m
        for m in meta_mismatches(stock, fast, provenance_roots_only=True)
        if not any(f": {k}: " in m for k in by_repr)
    ]
    for a, b in zip(stock.graph.nodes, fast.graph.nodes, strict=True):
        for key in by_repr:
            if repr(a.meta.get(key)) != repr(b.meta.get(key)):
                out.append(f"{a.name}: {key} {a.meta.get(key)!r} vs {b.meta.get(key)!r}")
    return out


def _delegates(program: Any) -> list[LoweredBackendModule]:
    return [m for m in program.graph_module.modules() if isinstance(m, LoweredBackendModule)]


@pytest.mark.parametrize("name", [*_models(), "upsample"])
def test_xnnpack_lowering_is_the_same(lowerings: dict[str, Any], name: str) -> None:
    (stock, stock_pte), (fast, fast_pte) = lowerings[name]
    assert fast.graph_module.code == stock.graph_module.code
    assert _meta_mismatches(stock.graph_module, fast.graph_module) == []
    stock_delegates, fast_delegates = _delegates(stock), _delegates(fast)
    assert len(fast_delegates) == len(stock_delegates) > 0
    for a, b in zip(stock_delegates, fast_delegates, strict=True):
        assert b.backend_id == a.backend_id
        assert bytes(b.processed_bytes) == bytes(a.processed_bytes)
        assert b.original_module.graph_module.code == a.original_module.graph_module.code
    assert fast_pte == stock_pte


def test_what_the_lowering_hands_back_is_plain(lowerings: dict[str, Any]) -> None:
    """deferred_lowering builds graph modules lazily inside the lowering: each one handed back
    (programs, nested graphs, the delegates' original programs) is a plain GraphModule with its
    code, as stock's are (the code itself is compared with stock's above)."""
    for name, (_, (fast, _)) in lowerings.items():
        modules = [m for root in handed_back_graph_modules([fast]) for m in root.modules()]
        graph_modules = [m for m in modules if isinstance(m, torch.fx.GraphModule)]
        assert len(graph_modules) >= 2, name  # the program's and a delegate's original
        for module in graph_modules:
            assert type(module).__bases__ == (torch.fx.GraphModule,), (name, type(module).__mro__)
            assert "_code" in vars(module), name


def test_every_pattern_holds_the_ops_the_skip_relies_on(lowerings: dict[str, Any]) -> None:
    """The skip is sound only if each listed op is in every pattern SubgraphMatcher must match."""
    specs = pattern_passes()
    assert {cls.__name__ for cls, _, _ in specs} == {"ConvertToSDPAPass", "ConvertToUpsampleBilinear2d"}
    for cls, required, get_patterns in specs:
        patterns = list(get_patterns())  # built (and cached) by the stock lowerings already
        assert patterns, cls
        for pattern in patterns:
            output = next(n for n in pattern.graph.nodes if n.op == "output")
            needed, stack = set(), list(output.all_input_nodes)
            while stack:
                node = stack.pop()
                if node not in needed:
                    needed.add(node)
                    stack.extend(node.all_input_nodes)
            targets = [n.target for n in needed if n.op == "call_function"]
            for op in required:
                assert any(t == op for t in targets), (cls.__name__, op)
            assert not cannot_match(pattern, required)


def _patched_attributes() -> dict[str, Any]:
    import torch.export.decomp_utils as decomp_utils
    import torch.export.exported_program as exported_program

    state: dict[str, Any] = {
        **{f"replay.{k}": v for k, v in _upstream.replay_state_snapshot().items()},
        **{f"fake.{k}": v for k, v in _upstream.fake_state_snapshot().items() if k != "cache"},
        "cia.exported_program": exported_program._collect_all_valid_cia_ops,
        "cia.decomp_utils": decomp_utils._collect_all_valid_cia_ops,
        "py_impl": vars(torch._ops.OperatorBase)["py_impl"],
        "cia.override": exported_program._override_composite_implicit_decomp,
        "set_current_meta": torch.fx.traceback.set_current_meta,
        "GraphModule.__new__": vars(torch.fx.GraphModule)["__new__"],
        "gen_edge_manager": _upstream.exir_program_module._gen_edge_manager_for_partitioners,
        "to_backend": vars(_upstream.exir_program_module.EdgeProgramManager)["to_backend"],
    }
    for cls, _, _ in pattern_passes():
        state[f"{cls.__name__}.call"] = vars(cls)["call"]
    return state


def test_every_patched_function_is_the_original_after_the_scope() -> None:
    before = _patched_attributes()
    with accelerated_lowering(), accelerated_lowering():
        inside = _patched_attributes()
    changed = {k for k in before if inside[k] is not before[k]}
    assert {
        "py_impl", "cia.exported_program", "cia.decomp_utils", "cia.override", "replay.run_node", "set_current_meta",
        "GraphModule.__new__", "gen_edge_manager", "to_backend",
    } <= changed
    assert {f"{cls.__name__}.call" for cls, _, _ in pattern_passes()} <= changed
    after = _patched_attributes()
    assert {k for k in before if after[k] is not before[k]} == set()

    with contextlib.suppress(RuntimeError), accelerated_lowering():
        raise RuntimeError("boom")
    after_error = _patched_attributes()
    assert {k for k in before if after_error[k] is not before[k]} == set()


def test_arm_tosa_int_lowering_is_the_same() -> None:
    """lower_to_arm's accelerated path (accelerated_arm_pipeline, so accelerated_lowering) vs stock."""
    from lowerkit.arm_passes import lower_to_arm

    model = zoo.get("conv_linear")
    runs = {}
    for stock in (True, False):
        with contextlib.redirect_stdout(io.StringIO()):
            runs[stock] = lower_to_arm(
                model.module(), model.example_inputs(), "TOSA-1.0+INT",
                calibration=model.calibration(4, 0), stock=stock,
            )
    assert runs[False].reports, "the accelerated pipeline did not run"
    assert runs[False].tosa_flatbuffers == runs[True].tosa_flatbuffers
    fast_program, stock_program = runs[False].program, runs[True].program
    assert fast_program is not None and stock_program is not None
    assert fast_program.graph_module.code == stock_program.graph_module.code
    assert runs[False].pte == runs[True].pte
