"""Exact torch versions of the TOSA dialect ops the pass pipeline creates, where ExecuTorch has none.

ExecuTorch 1.5.1 registers a real (reference-model) kernel for some TOSA dialect ops
(``register_tosa_op``), only fake ones for others (``register_fake_tosa_op``: TRANSPOSE,
RESHAPE, SLICE, ADD, TABLE, ...), and its real CONV2D / DEPTHWISE_CONV2D cannot run an int8
convolution outside the graph (their zero points live in the node's ``input_qparams`` meta,
which the one-op graph it builds lacks). These are integer-exact: data movement is data
movement, and convolutions accumulate (input - zp) * (weight - zp) + bias in float64, exact
for int8/int16 operands.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import torch

from lowerkit.arm_passes import _upstream

__all__ = ["TOSA_IN_TORCH", "tosa_name"]


def tosa_name(target: Any) -> str | None:
    """The TOSA op name of a TOSA dialect target (e.g. "CONV2D"), None for other targets."""
    name = str(getattr(target, "_name", None) or getattr(target, "__name__", "") or "")
    if name.startswith("tosa::"):
        return name.split("::", 1)[1].split(".")[0]
    if name.startswith("tosa."):
        return name.split(".")[1]
    return None


def _zero_point(node: torch.fx.Node, index: int) -> Any:
    qparams = (node.meta.get("input_qparams") or {}).get(index)
    if qparams is None:
        return 0
    zp = qparams.zp
    return torch.tensor(zp, dtype=torch.float64) if isinstance(zp, list | tuple) else float(zp)


def _accumulator(x: torch.Tensor) -> torch.dtype:
    return torch.int64 if x.dtype == torch.int16 else torch.int32


def _conv2d(node: torch.fx.Node, args: Sequence[Any], _kwargs: dict[str, Any]) -> torch.Tensor:
    x, weight, bias, stride, pad, dilation = args[:6]
    weight_zp = _zero_point(node, 1)
    w = weight.double() - (weight_zp.view(-1, 1, 1, 1) if isinstance(weight_zp, torch.Tensor) else weight_zp)
    return _conv(node, x, w.permute(0, 3, 1, 2), bias, stride, pad, dilation, groups=1)


def _depthwise_conv2d(node: torch.fx.Node, args: Sequence[Any], _kwargs: dict[str, Any]) -> torch.Tensor:
    x, weight, bias, stride, pad, dilation = args[:6]
    kh, kw, channels, multiplier = weight.shape
    weight_zp = _zero_point(node, 1)
    w = weight.double().reshape(kh, kw, channels * multiplier, 1).permute(2, 3, 0, 1)
    w = w - (weight_zp.view(-1, 1, 1, 1) if isinstance(weight_zp, torch.Tensor) else weight_zp)
    return _conv(node, x, w, bias, stride, pad, dilation, groups=channels)


def _conv(
    node: torch.fx.Node, x: torch.Tensor, w: torch.Tensor, bias: torch.Tensor, stride: Any, pad: Any, dilation: Any,
    groups: int,
) -> torch.Tensor:
    """NHWC input, OIHW float64 weight (zero point removed): the int accumulator, NHWC."""
    if x.dtype.is_floating_point:
        raise NotImplementedError("float TOSA convolutions are not evaluated (INT profiles only)")
    top, bottom, left, right = (int(p) for p in pad)
    inputs = torch.nn.functional.pad(x.double().permute(0, 3, 1, 2) - _zero_point(node, 0), (left, right, top, bottom))
    out = torch.nn.functional.conv2d(
        inputs, w, None, stride=tuple(stride), dilation=tuple(dilation), groups=groups
    )
    out = out + bias.double().view(1, -1, 1, 1)
    return torch.round(out).to(_accumulator(x)).permute(0, 2, 3, 1).contiguous()


_RANGES = {torch.int8: (-128, 127), torch.int16: (-32768, 32767), torch.int32: (-(2**31), 2**31 - 1)}


def _rescale(node: torch.fx.Node | None, args: Sequence[Any], kwargs: dict[str, Any]) -> torch.Tensor:
    """TOSA RESCALE as ExecuTorch serializes it (SINGLE_ROUND, per channel on the last axis;
    32-bit multipliers, 16-bit where the input is typed INT48 (an int16 convolution's
    accumulator, held here as int64)): ((x - in_zp) * multiplier + 2^(shift-1)) >> shift,
    + out_zp, saturated."""
    x, dtype, scales, in_zp, out_zp = args[:5]
    unsigned = [kwargs.get("input_unsigned", args[5] if len(args) > 5 else False),
                kwargs.get("output_unsigned", args[6] if len(args) > 6 else False)]
    if any(unsigned) or (x.dtype not in _RANGES and x.dtype != torch.int64) or dtype not in _RANGES:
        raise NotImplementedError(f"RESCALE {x.dtype} -> {dtype} (unsigned {unsigned}) is not evaluated in torch")
    source = node.args[0] if node is not None and node.args else None
    int48 = _upstream.is_int48(source) if isinstance(source, torch.fx.Node) else x.dtype == torch.int64
    width = 16 if int48 else 32
    multipliers, shifts = _upstream.rescale_multipliers([float(v) for v in scales], width)
    multiplier = torch.tensor(multipliers, dtype=torch.int64)
    shift = torch.tensor(shifts, dtype=torch.int64)
    value = x.to(torch.int64) - int(in_zp)
    result = (value * multiplier + (torch.ones_like(shift) << (shift - 1))) >> shift
    low, high = _RANGES[dtype]
    return torch.clamp(result + int(out_zp), low, high).to(dtype)


def _slice(_node: torch.fx.Node, args: Sequence[Any], _kwargs: dict[str, Any]) -> torch.Tensor:
    x, start, size = args[:3]
    index = tuple(slice(int(b), int(b) + int(n)) for b, n in zip(start, size, strict=True))
    return x[index].clone()


def _pad(_node: torch.fx.Node, args: Sequence[Any], kwargs: dict[str, Any]) -> torch.Tensor:
    x, padding = args[:2]
    value = kwargs.get("value", args[2] if len(args) > 2 else 0)
    flat: list[int] = []
    for axis in reversed(range(x.dim())):
        flat += [int(padding[2 * axis]), int(padding[2 * axis + 1])]
    return torch.nn.functional.pad(x, flat, value=float(value))


def _table(_node: torch.fx.Node, args: Sequence[Any], _kwargs: dict[str, Any]) -> torch.Tensor:
    """int8: a 256-entry lookup; int16: TOSA's 513-entry table, interpolated to an int32 result."""
    x, table = args[:2]
    if x.dtype == torch.int8:
        return table[(x.long() + 128)]
    if x.dtype != torch.int16:
        raise NotImplementedError(f"TABLE of {x.dtype} is not evaluated in torch")
    value = x.long() + 32768
    index, fraction = value >> 7, value & 0x7F
    base, following = table.long()[index], table.long()[index + 1]
    return ((base << 7) + (following - base) * fraction).to(torch.int32)


def _clamp(_node: torch.fx.Node, args: Sequence[Any], _kwargs: dict[str, Any]) -> torch.Tensor:
    x, low, high = args[:3]
    if x.dtype.is_floating_point:
        raise NotImplementedError("float CLAMP is left to the real kernel (NaN propagation)")
    return torch.clamp(x, int(low), int(high))


def _max_pool2d(_node: torch.fx.Node, args: Sequence[Any], _kwargs: dict[str, Any]) -> torch.Tensor:
    x, kernel, stride, pad = args[:4]
    if x.dtype.is_floating_point:
        raise NotImplementedError("float MAX_POOL2D is left to the real kernel")
    top, bottom, left, right = (int(p) for p in pad)
    low = torch.iinfo(x.dtype).min
    nchw = torch.nn.functional.pad(x.permute(0, 3, 1, 2).double(), (left, right, top, bottom), value=float(low))
    out = torch.nn.functional.max_pool2d(nchw, tuple(kernel), tuple(stride))
    return out.to(x.dtype).permute(0, 2, 3, 1).contiguous()


def _wrap32(value: torch.Tensor, like: torch.Tensor) -> torch.Tensor:
    return value.to(like.dtype) if like.dtype != torch.int32 else value.to(torch.int64).to(torch.int32)


def _mul(_node: torch.fx.Node, args: Sequence[Any], kwargs: dict[str, Any]) -> torch.Tensor:
    a, b = args[:2]
    shift = int(kwargs.get("shift", args[2] if len(args) > 2 else 0))
    if a.dtype.is_floating_point:
        return a * b
    product = a.to(torch.int64) * b.to(torch.int64)
    if shift > 0:
        product = (product + (1 << (shift - 1))) >> shift
    return product.to(a.dtype)


def _reduce(op: Callable[..., Any]) -> Callable[[torch.fx.Node, Sequence[Any], dict[str, Any]], torch.Tensor]:
    def run(_node: torch.fx.Node, args: Sequence[Any], kwargs: dict[str, Any]) -> torch.Tensor:
        axis = int(kwargs.get("axis", args[1] if len(args) > 1 else 0))
        result = op(args[0], axis)
        return result.to(args[0].dtype)

    return run


def _concat(_node: torch.fx.Node, args: Sequence[Any], kwargs: dict[str, Any]) -> torch.Tensor:
    return torch.cat(list(args[0]), dim=int(kwargs.get("axis", args[1] if len(args) > 1 else 0)))


def _binary(op: Callable[[torch.Tensor, torch.Tensor], torch.Tensor]) -> Callable[..., torch.Tensor]:
    def run(_node: torch.fx.Node, args: Sequence[Any], _kwargs: dict[str, Any]) -> torch.Tensor:
        a, b = args[:2]
        return op(a, b)

    return run


def _integer_add(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    return _wrap32(a.to(torch.int64) + b.to(torch.int64), a) if not a.dtype.is_floating_point else a + b


def _integer_sub(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    return _wrap32(a.to(torch.int64) - b.to(torch.int64), a) if not a.dtype.is_floating_point else a - b


#: TOSA op name -> fn(node, args, kwargs): the op's result on real tensors.
TOSA_IN_TORCH: dict[str, Callable[[torch.fx.Node, Sequence[Any], dict[str, Any]], Any]] = {
    "CONST_SHAPE": lambda _n, args, _k: [int(v) for v in args[0]],
    "TRANSPOSE": lambda _n, args, _k: args[0].permute(*[int(p) for p in args[1]]).contiguous(),
    "RESHAPE": lambda _n, args, _k: args[0].reshape([int(v) for v in args[1]]).clone(),
    "SLICE": _slice,
    "PAD": _pad,
    "CONCAT": _concat,
    "TILE": lambda _n, args, _k: args[0].repeat(*[int(v) for v in args[1]]),
    "REVERSE": lambda _n, args, k: torch.flip(args[0], dims=(int(k.get("axis", args[1] if len(args) > 1 else 0)),)),
    "IDENTITY": lambda _n, args, _k: args[0].clone(),
    "RESCALE": _rescale,
    "CONV2D": _conv2d,
    "DEPTHWISE_CONV2D": _depthwise_conv2d,
    "TABLE": _table,
    "CLAMP": _clamp,
    "MAX_POOL2D": _max_pool2d,
    "ADD": _binary(_integer_add),
    "SUB": _binary(_integer_sub),
    "MUL": _mul,
    "MAXIMUM": _binary(torch.maximum),
    "MINIMUM": _binary(torch.minimum),
    "EQUAL": _binary(torch.eq),
    "GREATER": _binary(torch.gt),
    "GREATER_EQUAL": _binary(torch.ge),
    "SELECT": lambda _n, args, _k: torch.where(args[0], args[1], args[2]),
    "ABS": lambda _n, args, _k: torch.abs(args[0]),
    "REDUCE_SUM": _reduce(lambda x, axis: x.to(torch.int64).sum(axis, keepdim=True) if not x.dtype.is_floating_point
                          else x.sum(axis, keepdim=True)),
    "REDUCE_MAX": _reduce(lambda x, axis: x.amax(axis, keepdim=True)),
    "REDUCE_MIN": _reduce(lambda x, axis: x.amin(axis, keepdim=True)),
}
