"""Patterns: the fast trace equals ExecuTorch's strict one; the op tables equal the traced ops."""

from __future__ import annotations

import operator

import pytest
import torch
import torch.nn.functional as F

from coreml_quantizer_tests.conftest import exported
from lowerkit.coreml_quantizer import PatternKey, all_pattern_keys
from lowerkit.coreml_quantizer.anchors import GraphOps, pattern_ops
from lowerkit.coreml_quantizer.patterns import trace_pattern

#: One of each shape of pattern: in place or not, batch norm, each binary-op family.
SAMPLE = [
    PatternKey("conv", 1),
    PatternKey("conv_bn", 2, F.hardtanh, True),
    PatternKey("conv", 3, F.gelu, False),
    PatternKey("linear", None, F.relu, True),
    PatternKey("linear_bn", None, F.logsigmoid, False),
    PatternKey("binary_op", operator.iadd, F.silu, True),
    PatternKey("binary_op", torch.mul, F.tanh, False),
    PatternKey("binary_op", torch.matmul),
]


def _structure(graph_module: torch.fx.GraphModule) -> tuple[object, ...]:
    nodes = tuple(
        (n.name, n.op, str(n.target), repr(n.args), repr(n.kwargs))
        for n in graph_module.graph.nodes
    )
    submodules = tuple(name for name, _ in graph_module.named_modules())
    return graph_module.code, nodes, str(graph_module._out_spec), submodules


@pytest.mark.parametrize("key", SAMPLE, ids=lambda k: k.describe())
def test_non_strict_trace_equals_executorchs_strict_trace(key: PatternKey) -> None:
    assert _structure(trace_pattern(key)) == _structure(trace_pattern(key, strict=True))


def test_op_tables_equal_the_traced_ops() -> None:
    # Every 9th pattern (45 of 405) covers each activation, op and batch-norm variant.
    for key in all_pattern_keys()[::9]:
        traced = {n.target for n in trace_pattern(key).graph.nodes if n.op == "call_function"}
        assert pattern_ops(key) == traced, key.describe()


def test_trace_leaves_the_global_rng_alone() -> None:
    state = torch.random.get_rng_state()
    trace_pattern(PatternKey("linear"))
    assert torch.equal(state, torch.random.get_rng_state())


def test_can_match_needs_the_ops_chained() -> None:
    # conv -> bn (folded away by export? no: eval batch_norm stays) -> relu, conv -> add -> relu
    ops = GraphOps(exported("conv").graph)
    assert ops.can_match(PatternKey("conv", 2))
    assert ops.can_match(PatternKey("binary_op", operator.add, F.relu, False))
    assert ops.can_match(PatternKey("linear"))
    # relu and linear are both in the graph, but no relu takes a linear's output.
    assert not ops.can_match(PatternKey("linear", None, F.relu, False))
    assert not ops.can_match(PatternKey("conv", 1))
    assert not ops.can_match(PatternKey("conv", 2, F.relu, True))


def test_key_validation() -> None:
    with pytest.raises(ValueError, match="Dimension 4"):
        PatternKey("conv", 4)
    with pytest.raises(ValueError, match="no in-place form"):
        PatternKey("linear", None, F.gelu, True)
