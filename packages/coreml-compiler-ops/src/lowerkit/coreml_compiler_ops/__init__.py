"""Translations of torch / torchao ops into Core ML MIL for coremltools' torch frontend, and decoders for the weights they emit."""

from lowerkit.coreml_compiler_ops.decode import (
    constexpr_storage_bytes,
    decode_constexpr_weights,
    supported_constexpr_ops,
)
from lowerkit.coreml_compiler_ops.errors import UnsupportedOpError
from lowerkit.coreml_compiler_ops.registry import (
    displaced_translation,
    is_registered,
    register,
    registered_ops,
    unregister,
)

__all__ = [
    "UnsupportedOpError",
    "constexpr_storage_bytes",
    "decode_constexpr_weights",
    "displaced_translation",
    "is_registered",
    "register",
    "registered_ops",
    "supported_constexpr_ops",
    "unregister",
]
