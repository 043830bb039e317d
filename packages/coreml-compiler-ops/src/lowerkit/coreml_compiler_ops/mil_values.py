"""Reading MIL tensor values (immediate or in a weights blob file) into numpy, with numpy only.

Sub-byte types (int4, uint1..uint6) are returned unpacked, one element per numpy item
(int8 for int4, uint8 for the unsigned ones).
"""

from __future__ import annotations

import struct
from pathlib import Path
from typing import Any

import numpy as np

from lowerkit.coreml_compiler_ops.errors import UnsupportedOpError

_BLOB_SENTINEL = 0xDEADBEEF
_BLOB_METADATA = struct.Struct(
    "<IIQQQ"
)  # sentinel, dtype code, size in bytes, data offset, padding bits

#: MIL.proto DataType enum names -> (numpy storage dtype, bit width).
_PROTO_TYPES: dict[str, tuple[Any, int]] = {
    "BOOL": (np.bool_, 8),
    "FLOAT16": (np.float16, 16),
    "FLOAT32": (np.float32, 32),
    "FLOAT64": (np.float64, 64),
    "INT8": (np.int8, 8),
    "INT16": (np.int16, 16),
    "INT32": (np.int32, 32),
    "INT64": (np.int64, 64),
    "INT4": (np.int8, 4),
    "UINT8": (np.uint8, 8),
    "UINT16": (np.uint16, 16),
    "UINT32": (np.uint32, 32),
    "UINT64": (np.uint64, 64),
    "UINT1": (np.uint8, 1),
    "UINT2": (np.uint8, 2),
    "UINT3": (np.uint8, 3),
    "UINT4": (np.uint8, 4),
    "UINT6": (np.uint8, 6),
}


def unpack_bits(packed: np.ndarray, nbits: int, count: int, signed: bool = False) -> np.ndarray:
    """Unpack ``count`` ``nbits``-bit elements stored LSB-first (Core ML's packing) from bytes."""
    raw = np.ascontiguousarray(packed).view(np.uint8).reshape(-1)
    if raw.size * 8 < count * nbits:
        raise ValueError(f"{raw.size} bytes cannot hold {count} {nbits}-bit elements")
    if nbits == 8:
        values = raw[:count].copy()
    elif 8 % nbits == 0:  # 1, 2, 4 bits: whole elements per byte
        shifts = np.arange(0, 8, nbits, dtype=np.uint8)
        values = ((raw[:, None] >> shifts) & np.uint8(2**nbits - 1)).reshape(-1)[:count]
    else:  # 3, 6 bits: elements straddle bytes
        bits = np.unpackbits(raw, bitorder="little")[: count * nbits].reshape(count, nbits)
        values = np.packbits(bits, axis=1, bitorder="little")[:, 0]
    if signed:
        wide = values.astype(np.int16)
        return np.where(wide >= 2 ** (nbits - 1), wide - 2**nbits, wide).astype(np.int8)
    return values.astype(np.uint8)


def packed_size_bytes(nbits: int, count: int) -> int:
    """Bytes that ``count`` ``nbits``-bit elements occupy when packed."""
    return (nbits * count + 7) // 8


def _from_bytes(raw: bytes, type_name: str, shape: tuple[int, ...]) -> np.ndarray:
    np_dtype, nbits = _PROTO_TYPES[type_name]
    count = int(np.prod(shape, dtype=np.int64))
    if nbits < 8:
        values = unpack_bits(
            np.frombuffer(raw, dtype=np.uint8), nbits, count, signed=type_name == "INT4"
        )
    else:
        values = np.frombuffer(raw, dtype=np_dtype, count=count)
    return values.reshape(shape).copy()


def read_blob(path: Path, offset: int, type_name: str, shape: tuple[int, ...]) -> np.ndarray:
    """Read the blob whose metadata record starts at ``offset`` in a MIL weights file."""
    with open(path, "rb") as handle:
        handle.seek(offset)
        sentinel, _code, size, data_offset, _padding = _BLOB_METADATA.unpack(
            handle.read(_BLOB_METADATA.size)
        )
        if sentinel != _BLOB_SENTINEL:
            raise ValueError(
                f"{path} has no blob metadata at offset {offset} (bad sentinel {sentinel:#x})"
            )
        handle.seek(data_offset)
        raw = handle.read(size)
    return _from_bytes(raw, type_name, shape)


def value_type(value_type_proto: Any) -> tuple[str, tuple[int, ...]]:
    """(DataType name, static shape) of a MIL.proto ValueType holding a tensor."""
    from coremltools.proto import MIL_pb2

    tensor = value_type_proto.tensorType
    shape = tuple(int(dim.constant.size) for dim in tensor.dimensions)
    return MIL_pb2.DataType.Name(tensor.dataType), shape


def read_value(value: Any, weights_dir: Path | None) -> np.ndarray:
    """numpy array of a MIL.proto Value (immediate or blob file)."""
    type_name, shape = value_type(value.type)
    if type_name not in _PROTO_TYPES:
        raise UnsupportedOpError("MIL value", f"data type {type_name}", sorted(_PROTO_TYPES))
    if value.HasField("blobFileValue"):
        if weights_dir is None:
            raise ValueError(
                "This spec keeps weights in a blob file; pass weights_dir= (the model package's Data/"
                "com.apple.CoreML/weights folder, or MLModel.weights_dir)."
            )
        file_name = value.blobFileValue.fileName.split("/")[-1]
        return read_blob(
            Path(weights_dir) / file_name, int(value.blobFileValue.offset), type_name, shape
        )
    tensor = value.immediateValue.tensor
    field = tensor.WhichOneof("value")
    np_dtype, _ = _PROTO_TYPES[type_name]
    if field == "bytes":
        return _from_bytes(tensor.bytes.values, type_name, shape)
    if field is None:
        return np.zeros(shape, dtype=np_dtype)
    items = list(getattr(tensor, field).values)
    if field == "strings":
        return np.array(items, dtype=object).reshape(shape)
    return np.array(items, dtype=np_dtype).reshape(shape)


def read_scalar_string(value: Any) -> str:
    """The string held by a MIL.proto Value (e.g. constexpr_cast's output_dtype)."""
    items = value.immediateValue.tensor.strings.values
    raw = items[0]
    return raw.decode("utf-8") if isinstance(raw, bytes) else str(raw)
