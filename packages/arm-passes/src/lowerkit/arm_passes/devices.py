"""The Arm targets lowerkit lowers to, and the stock ExecuTorch objects (compile spec, quantizer, partitioner) for each."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from executorch.backends.arm.ethosu.compile_spec import EthosUCompileSpec
from executorch.backends.arm.ethosu.partitioner import EthosUPartitioner
from executorch.backends.arm.quantizer import (
    EthosUQuantizer,
    TOSAQuantizer,
    get_symmetric_quantization_config,
)
from executorch.backends.arm.tosa.compile_spec import TosaCompileSpec
from executorch.backends.arm.tosa.partitioner import TOSAPartitioner

from lowerkit.arm_passes.errors import UnknownArmTargetError

__all__ = [
    "ARM_TARGETS",
    "compile_spec_for",
    "is_ethos_u",
    "is_integer",
    "partitioner_for",
    "quantizer_for",
]

#: Target names: TOSA profiles (flatbuffer only) and Ethos-U configurations (TOSA + vela).
ARM_TARGETS: tuple[str, ...] = ("TOSA-1.0+INT", "TOSA-1.0+FP", "ethos-u55-128", "ethos-u85-256")


def _check(target: str) -> str:
    if target not in ARM_TARGETS:
        raise UnknownArmTargetError(
            f"unknown Arm target {target!r}; use one of: {', '.join(ARM_TARGETS)}"
        )
    return target


def is_ethos_u(target: str) -> bool:
    """True for the Ethos-U targets (whose TOSA is compiled further by vela)."""
    return _check(target).startswith("ethos-u")


def is_integer(target: str) -> bool:
    """True for targets that run quantized integer TOSA (everything but TOSA-1.0+FP)."""
    return _check(target) != "TOSA-1.0+FP"


def compile_spec_for(target: str) -> Any:
    """A fresh stock compile spec (TosaCompileSpec or EthosUCompileSpec) for `target`."""
    if is_ethos_u(target):
        return EthosUCompileSpec(target)
    return TosaCompileSpec(target)


def quantizer_for(compile_spec: Any, keep_float: Sequence[str] = ()) -> Any:
    """The stock Arm quantizer for a compile spec, with the symmetric int8 config set globally.

    The modules named in `keep_float` (e.g. "features.3.0") are not quantized.
    """
    cls = EthosUQuantizer if isinstance(compile_spec, EthosUCompileSpec) else TOSAQuantizer
    quantizer = cls(compile_spec)
    quantizer.set_global(get_symmetric_quantization_config())
    for name in keep_float:
        quantizer.set_module_name(name, None)
    return quantizer


def partitioner_for(compile_spec: Any) -> Any:
    """The stock Arm partitioner for a compile spec."""
    if isinstance(compile_spec, EthosUCompileSpec):
        return EthosUPartitioner(compile_spec)
    return TOSAPartitioner(compile_spec)
