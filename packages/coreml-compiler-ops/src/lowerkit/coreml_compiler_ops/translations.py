"""Translations of torch / torchao ops into Core ML MIL for coremltools' torch frontend.

Each function has coremltools' translation signature ``fn(context, node)``. Where ExecuTorch
1.5.1 (``backends/apple/coreml/compiler/torch_ops.py``) has a translation for the same op and
the input is one it accepts, these build the same MIL: they call the same coremltools helpers
with the same arguments. Beyond that they accept more (iOS16 codebooks with codes above
2**(nbits-1), uint3/uint5/uint7 codes, ``dequantize_affine`` calls with defaulted arguments,
2-D blocks on iOS18) and fail with :class:`UnsupportedOpError` where Core ML cannot express
the input.

Two folds serve ``Int8WeightOnlyConfig``, whose linear layers export as
``mm(x, qdata.t().to(float)) * scale`` rather than through ``dequantize_affine``:
:func:`fold_int8_weight_mul` turns that into a linear on a constexpr-dequantized int8 weight,
and :func:`fold_int8_constant_transpose` transposes the int8 constant in numpy before iOS17
(MIL's transpose takes no int8 there). Every other ``mul`` / transpose is left to coremltools.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import torch

from lowerkit.coreml_compiler_ops import _upstream
from lowerkit.coreml_compiler_ops.errors import UnsupportedOpError

_CODEBOOK_OP = "quant.dequantize_codebook"
_AFFINE_OP = "torchao.dequantize_affine"
_IOS18_HINT = "Set minimum_deployment_target=coremltools.target.iOS18 (or later) for this weight."

#: Index widths Core ML's constexpr_lut_to_dense can store, per opset.
LUT_INDEX_BITS_IOS16 = (1, 2, 4, 6, 8)
LUT_INDEX_BITS_IOS18 = (1, 2, 3, 4, 6, 8)

#: (quant_min, quant_max) -> MIL storage type for constexpr dequantization.
AFFINE_RANGES = {
    (-8, 7): "int4",
    (-128, 127): "int8",
    (0, 15): "uint4",
    (0, 255): "uint8",
}


def _val(var: Any) -> Any:
    return None if var is None else var.val


def _optional_input(context: Any, node: Any, inputs: list[Any], index: int, keyword: str) -> Any:
    """Value of a positional-or-keyword argument, or None when absent."""
    if len(inputs) > index:
        return _val(inputs[index])
    kw = _upstream.get_kwinputs(context, node, keyword, default=None)
    return None if kw is None else _val(kw[0])


def _require_const(op: str, what: str, value: Any) -> np.ndarray:
    if value is None:
        raise UnsupportedOpError(
            op,
            f"{what} is not a compile-time constant",
            ["constant weights (module parameters or buffers)"],
            "Quantize parameters, not activations, for Core ML constexpr weights.",
        )
    return np.asarray(value)


def _contiguous_dim_order(op: str, dim_order: Any) -> None:
    order = [int(d) for d in np.asarray(dim_order).reshape(-1)]
    if order != list(range(len(order))):
        raise UnsupportedOpError(
            op,
            f"dim_order {order} is not contiguous",
            [f"contiguous dim_order {list(range(len(order)))}"],
            "Core ML only supports contiguous memory format.",
        )


def split_copy(context: Any, node: Any) -> None:
    """``aten.split_copy``: the same MIL as ``aten.split``."""
    _upstream.split_translation(context, node)


def to_dim_order_copy(context: Any, node: Any) -> None:
    """``dim_order_ops._to_dim_order_copy`` (dotted alias coremltools 9.0 lacks)."""
    _upstream.to_dim_order_copy_translation(context, node)


def empty_dim_order(context: Any, node: Any) -> None:
    """``dim_order_ops._empty_dim_order`` (dotted alias coremltools 9.0 lacks)."""
    _upstream.empty_dim_order_translation(context, node)


def clone_dim_order(context: Any, node: Any) -> None:
    """``dim_order_ops._clone_dim_order``: a no-op for contiguous dim orders."""
    dim_order = _upstream.get_kwinputs(context, node, "dim_order", default=[None])[0]
    if node.kwinputs:
        node.kwinputs.pop("dim_order", None)
    if _val(dim_order) is not None:
        _contiguous_dim_order("dim_order_ops._clone_dim_order", _val(dim_order))
    _upstream.noop_translation(context, node)


def _affine_storage_type(quant_min: int | None, quant_max: int | None, input_dtype: Any) -> str:
    if quant_min is None or quant_max is None:
        torch_dtype = (
            _upstream.NUM_TO_TORCH_DTYPE.get(int(input_dtype)) if input_dtype is not None else None
        )
        if torch_dtype is None or torch_dtype.is_floating_point:
            raise UnsupportedOpError(
                _AFFINE_OP,
                f"quant_min/quant_max are absent and input_dtype {torch_dtype} is not an integer type",
                ["int8, uint8 or int32 input_dtype, or explicit quant_min/quant_max"],
            )
        info = torch.iinfo(torch_dtype)
        quant_min = int(info.min) if quant_min is None else quant_min
        quant_max = int(info.max) if quant_max is None else quant_max
    key = (int(quant_min), int(quant_max))
    if key not in AFFINE_RANGES:
        raise UnsupportedOpError(
            _AFFINE_OP,
            f"quantization range [{key[0]}, {key[1]}] has no Core ML storage type",
            [f"[{lo}, {hi}] ({name})" for (lo, hi), name in AFFINE_RANGES.items()],
            "Use int4 or int8 weights (e.g. IntxWeightOnlyConfig(weight_dtype=torch.int4)).",
        )
    return AFFINE_RANGES[key]


def dequantize_affine(context: Any, node: Any) -> None:
    """``torchao.dequantize_affine`` on a constant 2-D weight -> constexpr dequantization.

    iOS18+: ``constexpr_blockwise_shift_scale`` (any 2-D block); before iOS18:
    ``constexpr_affine_dequantize`` (per-tensor or per-channel only).
    """
    inputs = _upstream.get_inputs(context, node, expected=[5, 6, 7, 8])
    int_data = _require_const(_AFFINE_OP, "the quantized data", _val(inputs[0]))
    block_size = [int(b) for b in _require_const(_AFFINE_OP, "block_size", _val(inputs[1]))]
    scale = _require_const(_AFFINE_OP, "the scale", _val(inputs[2]))
    zero_point_val = _val(inputs[3]) if len(inputs) > 3 else None
    zero_point = None if zero_point_val is None else np.asarray(zero_point_val)
    input_dtype = _val(inputs[4])
    quant_min = _optional_input(context, node, inputs, 5, "quant_min")
    quant_max = _optional_input(context, node, inputs, 6, "quant_max")

    if int_data.ndim != 2 or len(block_size) != 2:
        raise UnsupportedOpError(
            _AFFINE_OP,
            f"weight of rank {int_data.ndim} with block_size {block_size}",
            ["rank-2 weights (linear and embedding) with a 2-element block_size"],
        )
    n, k = int_data.shape
    block = [n if b == -1 else b for b in block_size]
    if n % block[0] or k % block[1]:
        raise UnsupportedOpError(
            _AFFINE_OP,
            f"block_size {block_size} does not tile a weight of shape {(n, k)}",
            ["block sizes that divide the weight's shape"],
        )
    groups = (n // block[0], k // block[1])
    storage = _affine_storage_type(quant_min, quant_max, input_dtype)

    if not _upstream.opset_at_least_ios18() and groups[0] > 1 and groups[1] > 1:
        raise UnsupportedOpError(
            _AFFINE_OP,
            f"block_size {block_size} on a {(n, k)} weight ({groups[0]}x{groups[1]} scales) needs iOS18",
            [
                "iOS16/17: per-tensor or per-channel (block_size [1, K] or [N, 1])",
                "iOS18+: any 2-D block_size",
            ],
            _IOS18_HINT,
        )
    if not _upstream.opset_at_least_ios18() and storage in ("int4", "uint4"):
        raise UnsupportedOpError(
            _AFFINE_OP,
            f"{storage} weights need iOS18",
            ["iOS16/17: int8 and uint8 weights", "iOS18+: int4, uint4, int8, uint8 weights"],
            _IOS18_HINT,
        )

    scale = scale.reshape(groups)
    if zero_point is not None:
        zero_point = zero_point.reshape(groups)
    output = _upstream.construct_constexpr_dequant_op(
        int_data.astype(_upstream.sub_byte_np_dtype(storage)),
        zero_point,
        scale,
        name=node.name,
    )
    context.add(output, node.name)


def dequantize_codebook(context: Any, node: Any) -> None:
    """``quant.dequantize_codebook`` on a constant 2-D weight -> ``constexpr_lut_to_dense``.

    Codes whose width Core ML cannot store (uint3 before iOS18, uint5, uint7) are stored in
    the next wider index type with the table padded by zeros: same dense values.
    """
    inputs = _upstream.get_inputs(context, node, expected=[4, 5])
    codes = _require_const(_CODEBOOK_OP, "the codes", _val(inputs[0]))
    codebook = _require_const(_CODEBOOK_OP, "the codebook", _val(inputs[1]))
    nbits = int(_val(inputs[2]))
    block_size = [int(b) for b in np.asarray(_val(inputs[3])).reshape(-1)]
    ios18 = _upstream.opset_at_least_ios18()
    supported = [
        "rank-2 codes with a scalar codebook of shape (G_rows, G_cols, 2**nbits, 1)",
        "iOS18+: one table per tensor, per block of rows (block_size [r, -1]) or per block of columns (block_size [-1, c])",
        "iOS16/17: one table per tensor (block_size [-1, -1])",
    ]
    if not 1 <= nbits <= 8:
        raise UnsupportedOpError(
            _CODEBOOK_OP, f"nbits={nbits}", ["nbits 1..8 (uint1..uint8 codes)"]
        )
    if codes.ndim != 2 or codebook.ndim != 4:
        raise UnsupportedOpError(
            _CODEBOOK_OP,
            f"codes of rank {codes.ndim} with a codebook of rank {codebook.ndim}",
            supported,
        )
    if codebook.shape[2] != 2**nbits or codebook.shape[3] != 1:
        raise UnsupportedOpError(
            _CODEBOOK_OP,
            f"codebook shape {tuple(codebook.shape)} for {nbits}-bit codes (vector tables or a wrong table size)",
            supported,
        )
    n_row_tables, n_col_tables = int(codebook.shape[0]), int(codebook.shape[1])
    if (
        (n_row_tables > 1 and n_col_tables > 1)
        or codes.shape[0] % n_row_tables
        or codes.shape[1] % n_col_tables
    ):
        raise UnsupportedOpError(
            _CODEBOOK_OP,
            f"block_size {block_size} ({n_row_tables}x{n_col_tables} tables on codes of shape {tuple(codes.shape)})",
            supported,
        )
    if not ios18 and n_row_tables * n_col_tables > 1:
        raise UnsupportedOpError(
            _CODEBOOK_OP,
            f"block_size {block_size} ({n_row_tables * n_col_tables} tables) needs iOS18",
            supported,
            _IOS18_HINT,
        )

    index_bits = lut_index_bits(nbits, ios18)
    lut = codebook
    if index_bits != nbits:
        pad = [(0, 0), (0, 0), (0, 2**index_bits - 2**nbits), (0, 0)]
        lut = np.pad(codebook, pad)
    # Unsigned codes: the iOS16 path packs them as given (int8 would reject codes >= 2**(nbits-1));
    # the iOS18 path casts them to uint<bits> either way, as ExecuTorch's translation does.
    output = _upstream.construct_constexpr_lut_op(
        codes.astype(np.uint8 if not ios18 or index_bits != nbits else np.int8),
        lut,
        name=node.name,
    )
    context.add(output, node.name)


_INT8_TYPES = ("int8", "uint8")
_CAST_KINDS = (
    "_to_copy",
    "to",
    "dim_order_ops._to_dim_order_copy",
    "dim_order_ops::_to_dim_order_copy",
)
_MATMUL_KINDS = ("mm", "matmul")


def _producer(context: Any, name: str) -> Any | None:
    """The torch IR node of the graph being converted that outputs ``name``."""
    for candidate in _upstream.torch_graph_nodes(context):
        if name in candidate.outputs:
            return candidate
    return None


def _is_int8_weight_product(context: Any, node: Any, name: str) -> bool:
    """Whether torch value ``name`` is ``mm(x, cast_to_float(<layout op>(int8 constant)))``."""
    matmul = _producer(context, name)
    if matmul is None or matmul.kind not in _MATMUL_KINDS or len(matmul.inputs) != 2:
        return False
    cast = _producer(context, matmul.inputs[1])
    if cast is None or cast.kind not in _CAST_KINDS:
        return False
    source = context[cast.inputs[0]]
    return (
        source.val is not None
        and _upstream.mil_type_name(np.asarray(source.val).dtype) in _INT8_TYPES
    )


def _peek_inputs(context: Any, node: Any) -> list[Any] | None:
    """The node's inputs that are already in `context`, or None if any is a literal.

    Unlike coremltools' ``_get_inputs``, this builds nothing: materializing literals as
    ``const`` ops advances coremltools' global op-name counter, and a fold that then declines
    would renumber every later op against what the stock translation produces.
    """
    names = list(node.inputs)
    if not all(isinstance(name, str) and name in context for name in names):
        return None
    return [context[name] for name in names]


def fold_int8_weight_mul(context: Any, node: Any) -> bool:
    """Fold ``mul(linear(x, float(int8 W)), per-channel scale)`` into a constexpr-dequantized weight.

    That is the graph ``Int8WeightOnlyConfig`` leaves for a linear layer (``mm(x, W_int8.t().to(f))
    * scale``). Returns False, having built nothing, for any other ``mul``.
    """
    from coremltools.converters.mil import Builder as mb

    inputs = _peek_inputs(context, node)
    if inputs is None or len(inputs) != 2:
        return False
    for (product, scale), product_name in zip((inputs, inputs[::-1]), node.inputs, strict=True):
        linear = product.op
        if linear is None or linear.op_type != "linear" or scale.val is None or product.child_ops:
            continue
        if not _is_int8_weight_product(context, node, product_name):
            continue
        bias = linear.bias
        if bias is not None and (bias.val is None or np.any(bias.val)):
            continue
        weight = linear.weight
        if weight.val is None:
            continue
        n = int(weight.shape[0])
        scale_val = np.asarray(scale.val)
        if scale_val.size != n or (scale_val.ndim and scale_val.shape[-1] != n):
            continue
        data = np.asarray(weight.val)
        storage = "int8" if data.min() >= -128 and data.max() <= 127 else "uint8"
        if not np.array_equal(data, np.round(data)) or data.min() < -128 or data.max() > 255:
            continue
        dequantized = _upstream.construct_constexpr_dequant_op(
            data.astype(_upstream.sub_byte_np_dtype(storage)),
            None,
            scale_val.reshape(n, 1).astype(np.float32),
            name=f"{node.name}_weight",
        )
        context.add(mb.linear(x=linear.x, weight=dequantized, name=node.name), node.name)
        return True
    return False


def fold_int8_constant_transpose(context: Any, node: Any) -> bool:
    """Before iOS17, transpose a constant int8/uint8 tensor in numpy (MIL's transpose cannot).

    ``Int8WeightOnlyConfig`` transposes its int8 weight (``qdata.t()``) before casting it.
    Returns False, having built nothing, for anything else.
    """
    from coremltools import target
    from coremltools.converters.mil import Builder as mb

    if _upstream.opset_at_least(target.iOS17):
        return False
    first = node.inputs[0] if node.inputs else None
    if not isinstance(first, str) or first not in context:
        return False
    value = context[first].val
    if value is None or _upstream.mil_type_name(np.asarray(value).dtype) not in _INT8_TYPES:
        return False
    inputs = _upstream.get_inputs(context, node)  # folding: materializing the rest is fine
    value = np.asarray(value)
    if node.kind in ("permute", "permute_copy"):
        perm = [int(p) % value.ndim for p in np.asarray(inputs[1].val).reshape(-1)]
    elif len(inputs) == 1:
        perm = list(reversed(range(value.ndim)))
    else:
        perm = list(range(value.ndim))
        ax0, ax1 = int(inputs[1].val) % value.ndim, int(inputs[2].val) % value.ndim
        perm[ax0], perm[ax1] = perm[ax1], perm[ax0]
    context.add(
        mb.const(val=np.ascontiguousarray(np.transpose(value, perm)), name=node.name), node.name
    )
    return True


def lut_index_bits(nbits: int, ios18: bool) -> int:
    """Index width (bits) Core ML stores ``nbits``-bit codebook codes in for a target family."""
    widths = LUT_INDEX_BITS_IOS18 if ios18 else LUT_INDEX_BITS_IOS16
    return next(w for w in widths if w >= nbits)


__all__ = [
    "clone_dim_order",
    "dequantize_affine",
    "dequantize_codebook",
    "empty_dim_order",
    "fold_int8_constant_transpose",
    "fold_int8_weight_mul",
    "lut_index_bits",
    "split_copy",
    "to_dim_order_copy",
]
