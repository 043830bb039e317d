"""The subgraph patterns ExecuTorch's Core ML quantizer matches, named by a hashable key.

A pattern is an aten graph traced from a tiny module (input -> op [-> batch_norm]
[-> activation]) that returns its output plus a dict naming the nodes the annotator
needs. ``PatternKey`` holds the real arguments of ExecuTorch's pattern getters
(``get_conv_pattern(conv_dim, act_fn, act_in_place)`` and friends); ``trace_pattern``
builds the same graph as those getters for a key, from the same module and input
shapes, but with a non-strict export (same graph, checked by the tests) and example
values from a private generator instead of the global RNG.
"""

from __future__ import annotations

import operator
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Literal

import torch
import torch.nn.functional as F
from torch.fx import GraphModule

from lowerkit.coreml_quantizer import _upstream

PatternKind = Literal["conv", "conv_bn", "linear", "linear_bn", "binary_op"]

#: Activations with an ``inplace`` argument, in ExecuTorch's order.
ACTIVATIONS: tuple[Callable[..., Any], ...] = (
    F.relu,
    F.relu6,
    F.leaky_relu,
    F.silu,
    F.elu,
    F.celu,
    F.selu,
    F.mish,
    F.hardtanh,
    F.hardswish,
    F.hardsigmoid,
)

#: Activations without an ``inplace`` argument, in ExecuTorch's order.
ACTIVATIONS_NO_INPLACE: tuple[Callable[..., Any], ...] = (
    F.gelu,
    F.sigmoid,
    F.logsigmoid,
    F.tanh,
)

CONV_FUNCTIONS: dict[int, Callable[..., Any]] = {1: F.conv1d, 2: F.conv2d, 3: F.conv3d}

#: The binary ops ExecuTorch's add / mul / matmul annotators match.
ADD_OPS: tuple[Callable[..., Any], ...] = (operator.add, torch.add, operator.iadd)
MUL_OPS: tuple[Callable[..., Any], ...] = (operator.mul, torch.mul, operator.imul)
MATMUL_OPS: tuple[Callable[..., Any], ...] = (torch.matmul,)


@dataclass(frozen=True)
class PatternKey:
    """A pattern's identity: the getter (kind) and its real arguments."""

    kind: PatternKind
    #: conv_dim (1, 2, 3) for conv kinds, the binary op callable for binary_op, None for linear.
    op: Any = None
    act_fn: Callable[..., Any] | None = None
    act_in_place: bool = False

    def __post_init__(self) -> None:
        if self.kind in ("conv", "conv_bn") and self.op not in CONV_FUNCTIONS:
            raise ValueError(f"Dimension {self.op} is not supported for Convolution layers.")
        if self.kind in ("linear", "linear_bn") and self.op is not None:
            raise ValueError(f"linear patterns take no op, got {self.op!r}")
        if self.kind == "binary_op" and not callable(self.op):
            raise ValueError(f"binary_op patterns need a callable op, got {self.op!r}")
        if self.act_in_place and self.act_fn not in ACTIVATIONS:
            raise ValueError(f"{self.act_fn!r} has no in-place form")

    def describe(self) -> str:
        """A short readable name, e.g. ``conv_bn(2, relu, inplace)``."""
        op = self.op if isinstance(self.op, int) or self.op is None else _name(self.op)
        parts = [str(op)] if op is not None else []
        parts.append(_name(self.act_fn) if self.act_fn is not None else "none")
        if self.act_in_place:
            parts.append("inplace")
        return f"{self.kind}({', '.join(parts)})"


def _name(fn: Callable[..., Any]) -> str:
    return getattr(fn, "__name__", repr(fn))


def _weighted_mod_module(
    mod_fn: Callable[..., Any], act_fn: Callable[..., Any] | None, act_in_place: bool
) -> torch.nn.Module:
    class Pattern(torch.nn.Module):
        def forward(self, input, weight, bias):  # type: ignore[no-untyped-def]
            mod_out = mod_fn(input, weight, bias)
            output = mod_out
            node_dict = {
                "input": input,
                "mod": mod_out,
                "weight": weight,
                "bias": bias,
            }
            if act_fn is not None:
                output = act_fn(output, inplace=True) if act_in_place else act_fn(output)
                node_dict["output"] = output
            return output, node_dict

    return Pattern()


def _weighted_mod_bn_module(
    mod_fn: Callable[..., Any], act_fn: Callable[..., Any] | None, act_in_place: bool
) -> torch.nn.Module:
    class Pattern(torch.nn.Module):
        def forward(  # type: ignore[no-untyped-def]
            self, input, weight, bias, bn_weight, bn_bias, bn_run_mean, bn_run_var
        ):
            mod_out = mod_fn(input, weight, bias)
            output = F.batch_norm(
                mod_out, bn_run_mean, bn_run_var, bn_weight, bn_bias, training=True
            )
            if act_fn is not None:
                output = act_fn(output, inplace=True) if act_in_place else act_fn(output)
            return output, {
                "input": input,
                "mod": mod_out,
                "weight": weight,
                "bias": bias,
                "output": output,
            }

    return Pattern()


def _binary_op_module(
    binary_op: Callable[..., Any], act_fn: Callable[..., Any] | None, act_in_place: bool
) -> torch.nn.Module:
    class Pattern(torch.nn.Module):
        def forward(self, input_1, input_2):  # type: ignore[no-untyped-def]
            binary_op_out = binary_op(input_1, input_2)
            node_dict = {
                "binary_op": binary_op_out,
            }
            output = binary_op_out
            if act_fn is not None:
                output = act_fn(output, inplace=True) if act_in_place else act_fn(output)
                node_dict["output"] = output
            return output, node_dict

    return Pattern()


def _shapes(key: PatternKey) -> list[tuple[int, ...]]:
    """Example input shapes, the same as ExecuTorch's getters use."""
    if key.kind in ("conv", "conv_bn"):
        dim = int(key.op)
        shapes: list[tuple[int, ...]] = [(1, 1, *[3] * dim), (1, 1, *[1] * dim), (1,)]
        if key.kind == "conv_bn":
            shapes += [(1,)] * 4
        return shapes
    if key.kind == "linear":
        return [(1, 1), (3, 1), (3,)]
    if key.kind == "linear_bn":
        return [(2, 1), (3, 1), (3,), (3,), (3,), (3,), (3,)]
    return [(1,), (1,)]


def pattern_module(key: PatternKey) -> torch.nn.Module:
    """The tiny module ExecuTorch traces for this pattern."""
    if key.kind in ("conv", "linear"):
        mod_fn = CONV_FUNCTIONS[int(key.op)] if key.kind == "conv" else F.linear
        return _weighted_mod_module(mod_fn, key.act_fn, key.act_in_place)
    if key.kind in ("conv_bn", "linear_bn"):
        mod_fn = CONV_FUNCTIONS[int(key.op)] if key.kind == "conv_bn" else F.linear
        return _weighted_mod_bn_module(mod_fn, key.act_fn, key.act_in_place)
    return _binary_op_module(key.op, key.act_fn, key.act_in_place)


def example_inputs(key: PatternKey) -> tuple[torch.Tensor, ...]:
    """Example inputs of ExecuTorch's shapes, drawn from a private generator (not the global RNG)."""
    generator = torch.Generator().manual_seed(0)
    return tuple(torch.randn(shape, generator=generator) for shape in _shapes(key))


def trace_pattern(key: PatternKey, *, strict: bool = False) -> GraphModule:
    """Trace the pattern for ``key`` to an aten graph with ``torch.export``.

    ``strict=True`` is ExecuTorch's way (torchao's helper, a dynamo export); the
    default non-strict export gives the same graph in about a third of the time.
    """
    trace = _upstream.trace_pattern_strict if strict else _upstream.trace_pattern_non_strict
    return trace(pattern_module(key), example_inputs(key))
