"""The aten ops each pattern's traced graph contains, known without tracing it.

``SubgraphMatcher`` matches a pattern node only against a model node with the same
target, so a pattern whose ops are not all in the model cannot match it. Knowing a
pattern's ops up front lets the quantizer skip building it. The tables below are
checked against ExecuTorch's traced patterns by lowerkit's sameness tests.
"""

from __future__ import annotations

import operator
from collections.abc import Callable
from typing import Any

import torch
import torch.nn.functional as F
from torch.fx import Graph, Node

from lowerkit.coreml_quantizer._upstream import OpOverload
from lowerkit.coreml_quantizer.patterns import PatternKey

aten = torch.ops.aten

#: activation function -> (op when not in place, op when in place)
_ACTIVATION_OPS: dict[Callable[..., Any], tuple[OpOverload, OpOverload | None]] = {
    F.relu: (aten.relu.default, aten.relu_.default),
    F.relu6: (aten.relu6.default, aten.relu6_.default),
    F.leaky_relu: (aten.leaky_relu.default, aten.leaky_relu_.default),
    F.silu: (aten.silu.default, aten.silu_.default),
    F.elu: (aten.elu.default, aten.elu_.default),
    F.celu: (aten.celu.default, aten.celu_.default),
    F.selu: (aten.selu.default, aten.selu_.default),
    F.mish: (aten.mish.default, aten.mish_.default),
    F.hardtanh: (aten.hardtanh.default, aten.hardtanh_.default),
    F.hardswish: (aten.hardswish.default, aten.hardswish_.default),
    F.hardsigmoid: (aten.hardsigmoid.default, aten.hardsigmoid_.default),
    F.gelu: (aten.gelu.default, None),
    F.sigmoid: (aten.sigmoid.default, None),
    F.logsigmoid: (aten.log_sigmoid.default, None),
    F.tanh: (aten.tanh.default, None),
}

_CONV_OPS: dict[int, OpOverload] = {
    1: aten.conv1d.default,
    2: aten.conv2d.default,
    3: aten.conv3d.default,
}

_BINARY_OPS: dict[Callable[..., Any], OpOverload] = {
    operator.add: aten.add.Tensor,
    torch.add: aten.add.Tensor,
    operator.iadd: aten.add_.Tensor,
    operator.mul: aten.mul.Tensor,
    torch.mul: aten.mul.Tensor,
    operator.imul: aten.mul_.Tensor,
    torch.matmul: aten.matmul.default,
}


def pattern_chain(key: PatternKey) -> tuple[OpOverload, ...]:
    """The pattern's ops from first to last: op, then batch_norm, then the activation, if any."""
    chain: list[OpOverload] = []
    if key.kind in ("conv", "conv_bn"):
        chain.append(_CONV_OPS[int(key.op)])
    elif key.kind in ("linear", "linear_bn"):
        chain.append(aten.linear.default)
    else:
        chain.append(_BINARY_OPS[key.op])
    if key.kind in ("conv_bn", "linear_bn"):
        chain.append(aten.batch_norm.default)
    if key.act_fn is not None:
        plain, in_place = _ACTIVATION_OPS[key.act_fn]
        op = in_place if key.act_in_place else plain
        if op is None:
            raise ValueError(f"{key.describe()}: the activation has no in-place form")
        chain.append(op)
    return tuple(chain)


def pattern_ops(key: PatternKey) -> frozenset[OpOverload]:
    """Every call_function target in the traced graph of the pattern ``key``."""
    return frozenset(pattern_chain(key))


class GraphOps:
    """The call_function nodes of a graph, by target, for asking whether a pattern can match."""

    def __init__(self, graph: Graph) -> None:
        self.by_target: dict[Any, list[Node]] = {}
        for node in graph.nodes:
            if node.op == "call_function":
                self.by_target.setdefault(node.target, []).append(node)

    def can_match(self, key: PatternKey) -> bool:
        """False when the pattern for ``key`` cannot match the graph.

        Each pattern is a chain (op [-> batch_norm] [-> activation]) whose every
        node feeds the next as its first argument; ``SubgraphMatcher`` maps pattern
        nodes to graph nodes of the same target with the same argument edges, so a
        graph without such a chain has no match.
        """
        chain = pattern_chain(key)
        for last in self.by_target.get(chain[-1], ()):
            node: Any = last
            for target in reversed(chain[:-1]):
                node = node.args[0] if node.args else None
                if (
                    not isinstance(node, Node)
                    or node.op != "call_function"
                    or node.target != target
                ):
                    break
            else:
                return True
        return False
