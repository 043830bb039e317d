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
    "UnsupportedOpError",  # an op lowerkit cannot express in Core ML MIL or decode
    "constexpr_storage_bytes",  # bytes each constexpr op's constant inputs take as Core ML stores them
    "decode_constexpr_weights",  # dense numpy value of every constexpr op's output, by output name
    "displaced_translation",  # the translation someone else registered that lowerkit's shadows
    "is_registered",  # whether every lowerkit translation is the registry's entry for its name
    "register",  # register lowerkit's translations with coremltools (idempotent)
    "registered_ops",  # the registry names register takes over
    "supported_constexpr_ops",  # the constexpr op types decode_constexpr_weights decodes
    "unregister",  # undo register: each name maps to what others registered for it
]
