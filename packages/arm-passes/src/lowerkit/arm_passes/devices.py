"""The Arm targets lowerkit lowers to, and the stock ExecuTorch objects (compile spec, quantizer, partitioner) for each."""

from __future__ import annotations

import warnings
from collections.abc import Sequence
from typing import Any

from executorch.backends.arm.ethosu.compile_spec import EthosUCompileSpec
from executorch.backends.arm.ethosu.partitioner import EthosUPartitioner
from executorch.backends.arm.quantizer import (
    EthosUQuantizer,
    TOSAQuantizer,
    VgfQuantizer,
    get_symmetric_a16w8_quantization_config,
    get_symmetric_quantization_config,
)
from executorch.backends.arm.tosa import TosaSpecification
from executorch.backends.arm.tosa.compile_spec import TosaCompileSpec
from executorch.backends.arm.tosa.partitioner import TOSAPartitioner
from executorch.backends.arm.vgf import VgfCompileSpec, VgfPartitioner

from lowerkit.arm_passes.errors import ArmLoweringError, UnknownArmTargetError

__all__ = [
    "ARM_TARGETS",
    "ETHOS_U_TARGETS",
    "VGF_TARGETS",
    "compile_spec_for",
    "is_ethos_u",
    "is_integer",
    "is_vgf",
    "partitioner_for",
    "quantizer_for",
    "supports_int16",
]

#: Every Ethos-U configuration ExecuTorch 1.5.1's aot_arm_compiler accepts (MACs per cycle).
ETHOS_U_TARGETS: tuple[str, ...] = (
    *(f"ethos-u55-{macs}" for macs in (32, 64, 128, 256)),
    *(f"ethos-u65-{macs}" for macs in (256, 512)),
    *(f"ethos-u85-{macs}" for macs in (128, 256, 512, 1024, 2048)),
)

#: ExecuTorch's VGF backend (TOSA converted to VGF by the ML SDK model converter), one name per
#: TOSA profile: aot_arm_compiler's single ``vgf`` target takes TOSA-1.0+INT with ``--quantize``
#: and TOSA-1.0+FP without (``_get_compile_spec``), so "vgf-int" / "vgf-fp" are those two.
VGF_TARGETS: tuple[str, ...] = ("vgf-int", "vgf-fp")

#: Target names: TOSA profiles (flatbuffer only), Ethos-U configurations (TOSA + vela) and VGF.
#: "TOSA-1.0+INT+int16" quantizes a16w8 (int16 activations, int8 weights), as aot_arm_compiler.
ARM_TARGETS: tuple[str, ...] = ("TOSA-1.0+INT", "TOSA-1.0+FP", "TOSA-1.0+INT+int16", *ETHOS_U_TARGETS, *VGF_TARGETS)

#: The TOSA profile each VGF target lowers to (aot_arm_compiler's choice for ``vgf``).
_VGF_PROFILES = {"vgf-int": "TOSA-1.0+INT", "vgf-fp": "TOSA-1.0+FP"}


def _check(target: str) -> str:
    if target not in ARM_TARGETS:
        raise UnknownArmTargetError(
            f"unknown Arm target {target!r}; use one of: {', '.join(ARM_TARGETS)}"
        )
    return target


def is_ethos_u(target: str) -> bool:
    """True for the Ethos-U targets (whose TOSA is compiled further by vela)."""
    return _check(target).startswith("ethos-u")


def is_vgf(target: str) -> bool:
    """True for the VGF targets (whose TOSA is converted further by the ML SDK model converter)."""
    return _check(target) in VGF_TARGETS


def is_integer(target: str) -> bool:
    """True for targets that run quantized integer TOSA (all but TOSA-1.0+FP and vgf-fp)."""
    return _check(target) not in ("TOSA-1.0+FP", "vgf-fp")


def supports_int16(target: str) -> bool:
    """True for targets whose TOSA profile has the int16 extension (a16w8): TOSA-1.0+INT+int16 and Ethos-U."""
    return _check(target) not in ("TOSA-1.0+INT", "TOSA-1.0+FP", *VGF_TARGETS)


def compile_spec_for(
    target: str,
    *,
    system_config: str | None = None,
    memory_mode: str | None = None,
    config_ini: str | None = None,
) -> Any:
    """A fresh stock compile spec (TosaCompileSpec, EthosUCompileSpec or VgfCompileSpec) for `target`.

    Ethos-U only: `system_config` / `memory_mode` (None: ExecuTorch's defaults for the target)
    and `config_ini`, the Vela config file (None: Vela's own ``Arm/vela.ini``). VGF targets
    ignore them with a warning, as aot_arm_compiler does (silently) for ``vgf``; TOSA targets
    refuse them.
    """
    if is_ethos_u(target):
        return EthosUCompileSpec(
            target,
            system_config=system_config,
            memory_mode=memory_mode,
            config_ini=config_ini if config_ini is not None else "Arm/vela.ini",
        )
    given = (system_config, memory_mode, config_ini) != (None, None, None)
    if _check(target) in VGF_TARGETS:
        if given:
            warnings.warn(
                f"system config, memory mode and Vela config are Ethos-U (Vela) settings; {target} ignores them",
                UserWarning,
                stacklevel=2,
            )
        return VgfCompileSpec(TosaSpecification.create_from_string(_VGF_PROFILES[target]))
    if given:
        raise ArmLoweringError(
            f"system config, memory mode and Vela config apply to Ethos-U targets, not {target!r}"
        )
    return TosaCompileSpec(target)


def quantizer_for(compile_spec: Any, *, a16w8: bool = False, keep_float: Sequence[str] = ()) -> Any:
    """The stock Arm quantizer for a compile spec, with the symmetric int8 (or a16w8) config set globally.

    The modules named in `keep_float` (e.g. "features.3.0") are not quantized.
    """
    quantizer: Any
    if isinstance(compile_spec, EthosUCompileSpec):
        quantizer = EthosUQuantizer(compile_spec)
    elif isinstance(compile_spec, VgfCompileSpec):
        quantizer = VgfQuantizer(compile_spec)
    else:
        quantizer = TOSAQuantizer(compile_spec)
    config = get_symmetric_a16w8_quantization_config() if a16w8 else get_symmetric_quantization_config()
    quantizer.set_global(config)
    for name in keep_float:
        quantizer.set_module_name(name, None)
    return quantizer


def partitioner_for(compile_spec: Any) -> Any:
    """The stock Arm partitioner for a compile spec."""
    if isinstance(compile_spec, EthosUCompileSpec):
        return EthosUPartitioner(compile_spec)
    if isinstance(compile_spec, VgfCompileSpec):
        return VgfPartitioner(compile_spec)
    return TOSAPartitioner(compile_spec)
