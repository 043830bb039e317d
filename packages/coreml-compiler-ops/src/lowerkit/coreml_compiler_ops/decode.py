"""Decoding Core ML constexpr ops back to dense numpy weights, without a Core ML runtime.

Accepts an ``MLModel`` (its serialized spec and weights file are decoded), a pymil
``Program`` (``mlmodel._mil_program``), or a ``Model_pb2.Model`` spec (with ``weights_dir``
when its weights live in a blob file). Each constexpr op's output is computed with numpy
following the op's definition in coremltools' MIL op set (iOS16 and iOS18 variants).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from lowerkit.coreml_compiler_ops import _upstream, mil_values
from lowerkit.coreml_compiler_ops.errors import UnsupportedOpError

ModelLike = Any  # coremltools MLModel | pymil Program | Model_pb2.Model


@dataclass
class _Const:
    value: np.ndarray
    bits: int


@dataclass
class _Op:
    op_type: str
    outputs: list[str]
    inputs: dict[str, str]  # parameter name -> var name


@dataclass
class _Graph:
    consts: dict[str, _Const] = field(default_factory=dict)
    ops: list[_Op] = field(default_factory=list)


def _broadcast_blocks(param: np.ndarray, shape: tuple[int, ...]) -> np.ndarray:
    """Repeat a per-block parameter (same rank as ``shape``) up to ``shape``."""
    out = param
    for axis, (size, blocks) in enumerate(zip(shape, param.shape, strict=True)):
        if size % blocks:
            raise ValueError(
                f"a parameter of shape {param.shape} does not tile a tensor of shape {shape}"
            )
        if size != blocks:
            out = np.repeat(out, size // blocks, axis=axis)
    return out


def _affine(data: np.ndarray, scale: np.ndarray, offset: np.ndarray | None) -> np.ndarray:
    result = data.astype(np.float32)
    if offset is not None:
        result = result - offset.astype(np.float32)
    return (result * scale.astype(np.float32)).astype(scale.dtype)


def _constexpr_affine_dequantize(a: dict[str, Any]) -> np.ndarray:
    data, scale, zero_point = a["quantized_data"], a["scale"], a["zero_point"]
    axis = int(a["axis"]) % data.ndim
    shape = [1] * data.ndim
    if scale.size > 1:
        shape[axis] = data.shape[axis]
    return _affine(
        data, scale.reshape(shape), zero_point.reshape(shape) if zero_point.size > 1 else zero_point
    )


def _constexpr_blockwise_shift_scale(a: dict[str, Any]) -> np.ndarray:
    data, scale, offset = a["data"], a["scale"], a.get("offset")
    return _affine(
        data,
        _broadcast_blocks(scale, data.shape),
        None if offset is None else _broadcast_blocks(offset, data.shape),
    )


def _constexpr_lut_to_dense(a: dict[str, Any]) -> np.ndarray:
    lut, indices = a["lut"], a["indices"]
    if "shape" in a:  # iOS16: one table, indices packed in bytes
        shape = tuple(int(s) for s in a["shape"])
        nbits = int(np.log2(lut.size))
        codes = mil_values.unpack_bits(indices, nbits, int(np.prod(shape, dtype=np.int64)))
        return np.asarray(lut.reshape(-1)[codes.astype(np.int64)].reshape(shape))
    # iOS18: lut (*groups, palettes, vector_size), indices unpacked, optional vector_axis
    rank = indices.ndim
    vector_size = lut.shape[-1]
    idx = indices.astype(np.int64)
    if vector_size > 1:
        vector_axis = int(a["vector_axis"]) % rank
        idx = np.moveaxis(idx, vector_axis, -1)
        lut = np.moveaxis(lut, vector_axis, rank - 1)
    groups = [np.arange(size) // (size // lut.shape[i]) for i, size in enumerate(idx.shape)]
    grid = np.ix_(*groups)
    values = lut[(*grid, idx)]  # (*idx.shape, vector_size)
    if vector_size == 1:
        return np.asarray(values[..., 0])
    values = values.reshape(*idx.shape[:-1], idx.shape[-1] * vector_size)
    return np.asarray(np.moveaxis(values, -1, int(a["vector_axis"]) % rank))


def _constexpr_sparse_to_dense(a: dict[str, Any]) -> np.ndarray:
    nonzero, mask = a["nonzero_data"], a["mask"]
    if "shape" in a:  # iOS16: mask packed in bytes
        shape = tuple(int(s) for s in a["shape"])
        mask = mil_values.unpack_bits(mask, 1, int(np.prod(shape, dtype=np.int64))).reshape(shape)
    dense = np.zeros(mask.shape, dtype=nonzero.dtype)
    dense[mask.astype(bool)] = nonzero.reshape(-1)
    return dense


def _constexpr_cast(a: dict[str, Any]) -> np.ndarray:
    dtype = {"fp16": np.float16, "fp32": np.float32}.get(str(a["output_dtype"]))
    if dtype is None:
        raise UnsupportedOpError(
            "constexpr_cast", f"output_dtype {a['output_dtype']!r}", ["fp16", "fp32"]
        )
    return a["source_val"].astype(dtype)


_DECODERS: dict[str, Callable[[dict[str, Any]], np.ndarray]] = {
    "constexpr_affine_dequantize": _constexpr_affine_dequantize,
    "constexpr_blockwise_shift_scale": _constexpr_blockwise_shift_scale,
    "constexpr_lut_to_dense": _constexpr_lut_to_dense,
    "constexpr_sparse_to_dense": _constexpr_sparse_to_dense,
    "constexpr_cast": _constexpr_cast,
}


def supported_constexpr_ops() -> tuple[str, ...]:
    """Constexpr op types :func:`decode_constexpr_weights` can decode."""
    return tuple(sorted(_DECODERS))


def _bits_of(array: np.ndarray) -> int:
    name = _upstream.mil_type_name(array.dtype)
    for prefix in ("uint", "int", "fp", "bf"):
        if name and name.startswith(prefix) and name[len(prefix) :].isdigit():
            return int(name[len(prefix) :])
    return int(array.dtype.itemsize * 8)


def _graph_from_program(program: Any) -> _Graph:
    graph = _Graph()
    many = len(program.functions) > 1

    def key(fn_name: str, var_name: str) -> str:
        return f"{fn_name}/{var_name}" if many else var_name

    def visit(fn_name: str, block: Any) -> None:
        for op in block.operations:
            if op.op_type == "const":
                out = op.outputs[0]
                value = out.val
                if isinstance(value, (np.ndarray, np.generic)):
                    graph.consts[key(fn_name, out.name)] = _Const(
                        np.asarray(value), _bits_of(np.asarray(value))
                    )
                else:
                    graph.consts[key(fn_name, out.name)] = _Const(
                        np.asarray(value, dtype=object), 0
                    )
            elif op.op_type.startswith("constexpr_"):
                inputs = {
                    name: key(fn_name, var.name)
                    for name, var in op.inputs.items()
                    if var is not None
                }
                graph.ops.append(
                    _Op(op.op_type, [key(fn_name, v.name) for v in op.outputs], inputs)
                )
            for inner in op.blocks:
                visit(fn_name, inner)

    for fn_name, function in program.functions.items():
        visit(fn_name, function)
    return graph


def _graph_from_spec(spec: Any, weights_dir: Path | None) -> _Graph:
    if spec.WhichOneof("Type") != "mlProgram":
        raise UnsupportedOpError(
            "decode_constexpr_weights",
            f"a {spec.WhichOneof('Type')} model",
            ["ML Program models (convert_to='mlprogram')"],
        )
    graph = _Graph()
    functions = spec.mlProgram.functions
    many = len(functions) > 1
    inline = 0

    def key(fn_name: str, var_name: str) -> str:
        return f"{fn_name}/{var_name}" if many else var_name

    def const_of(value: Any) -> _Const:
        type_name, _ = mil_values.value_type(value.type)
        if type_name == "STRING":
            return _Const(np.asarray(mil_values.read_scalar_string(value), dtype=object), 0)
        array = mil_values.read_value(value, weights_dir)
        bits = {"INT4": 4, "UINT1": 1, "UINT2": 2, "UINT3": 3, "UINT4": 4, "UINT6": 6}.get(
            type_name, array.dtype.itemsize * 8
        )
        return _Const(array, bits)

    def visit(fn_name: str, block: Any) -> None:
        nonlocal inline
        for op in block.operations:
            if op.type == "const":
                graph.consts[key(fn_name, op.outputs[0].name)] = const_of(op.attributes["val"])
            elif op.type.startswith("constexpr_"):
                inputs: dict[str, str] = {}
                for name, argument in op.inputs.items():
                    binding = argument.arguments[0]
                    if binding.WhichOneof("binding") == "name":
                        inputs[name] = key(fn_name, binding.name)
                    else:
                        inline += 1
                        inputs[name] = f"<inline {inline}>"
                        graph.consts[inputs[name]] = const_of(binding.value)
                for (
                    name,
                    value,
                ) in op.attributes.items():  # iOS16 constexpr ops keep parameters here
                    if name not in inputs and name != "name":
                        inline += 1
                        inputs[name] = f"<inline {inline}>"
                        graph.consts[inputs[name]] = const_of(value)
                graph.ops.append(_Op(op.type, [key(fn_name, o.name) for o in op.outputs], inputs))
            for inner in op.blocks:
                visit(fn_name, inner)

    for fn_name, function in functions.items():
        block = function.block_specializations[function.opset]
        visit(fn_name, block)
    return graph


def _graph_of(model_or_program: ModelLike, weights_dir: str | Path | None) -> _Graph:
    directory = None if weights_dir is None else Path(weights_dir)
    if hasattr(model_or_program, "functions") and hasattr(model_or_program, "find_ops"):
        return _graph_from_program(model_or_program)
    if hasattr(model_or_program, "WhichOneof"):
        return _graph_from_spec(model_or_program, directory)
    if hasattr(model_or_program, "get_spec"):
        spec = model_or_program.get_spec()
        if directory is None:
            found = getattr(model_or_program, "weights_dir", None)
            directory = None if found is None else Path(found)
        return _graph_from_spec(spec, directory)
    raise TypeError(
        f"decode_constexpr_weights takes a coremltools MLModel, a MIL Program or a Model spec, "
        f"not {type(model_or_program).__name__}"
    )


def _decode(graph: _Graph) -> dict[str, np.ndarray]:
    decoded: dict[str, np.ndarray] = {}
    for op in graph.ops:
        decoder = _DECODERS.get(op.op_type)
        if decoder is None:
            raise UnsupportedOpError(
                op.op_type,
                f"cannot decode {op.op_type} (output {op.outputs[0]!r})",
                supported_constexpr_ops(),
            )
        args: dict[str, Any] = {}
        for name, var in op.inputs.items():
            if var in decoded:
                args[name] = decoded[var]
            elif var in graph.consts:
                value = graph.consts[var].value
                args[name] = value.item() if value.dtype == object else value
            else:
                raise UnsupportedOpError(
                    op.op_type, f"input {name!r} ({var}) is not constant", ["constant inputs"]
                )
        decoded[op.outputs[0]] = decoder(args)
    return decoded


def decode_constexpr_weights(
    model_or_program: ModelLike, weights_dir: str | Path | None = None
) -> dict[str, np.ndarray]:
    """Dense numpy value of every constexpr op's output, keyed by output name."""
    return _decode(_graph_of(model_or_program, weights_dir))


def constexpr_storage_bytes(
    model_or_program: ModelLike, weights_dir: str | Path | None = None
) -> dict[str, int]:
    """Bytes each constexpr op's constant inputs take as Core ML stores them (sub-byte types packed)."""
    graph = _graph_of(model_or_program, weights_dir)
    sizes: dict[str, int] = {}
    for op in graph.ops:
        total = 0
        for var in op.inputs.values():
            const = graph.consts.get(var)
            if const is not None and const.bits:
                total += mil_values.packed_size_bytes(const.bits, int(const.value.size))
        sizes[op.outputs[0]] = total
    return sizes
