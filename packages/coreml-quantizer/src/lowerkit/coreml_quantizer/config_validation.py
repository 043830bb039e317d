"""Checking coremltools configs for the pt2e Core ML quantizer.

A field that would make ExecuTorch's quantizer silently produce something other than what was
asked (4-bit weights, a learnable algorithm, activation-only quantization) is an error; a field
pt2e simply does not use (``milestones``, ``non_traceable_module_names``) is a warning, so every
config ExecuTorch accepts is accepted, with the same output.
"""

from __future__ import annotations

import warnings
from typing import Any

import torch
from coremltools.optimize.torch.quantization import (
    LinearQuantizerConfig,
    ModuleLinearQuantizerConfig,
)

from lowerkit.coreml_quantizer.annotation_config import observer_class
from lowerkit.coreml_quantizer.errors import CoreMLQuantizerError, IgnoredConfigFieldWarning


def _check_module_config(where: str, config: ModuleLinearQuantizerConfig | None) -> None:
    if config is None:
        return
    if config.algorithm != "vanilla":
        raise CoreMLQuantizerError(
            f"{where}: algorithm={config.algorithm!r} is not supported by the pt2e Core ML "
            "quantizer (it always inserts FakeQuantize with min/max observers); "
            "use algorithm='vanilla'."
        )
    if config.weight_dtype != torch.float32 and config.weight_n_bits != 8:
        raise CoreMLQuantizerError(
            f"{where}: {config.weight_n_bits}-bit weights are not supported by the pt2e "
            "Core ML quantizer (it would quantize them to 8 bits); use weight_dtype "
            "'qint8' / 'quint8', or quantize weights with a torchao weight-only config instead."
        )
    if config.weight_dtype == torch.float32 and config.activation_dtype != torch.float32:
        raise CoreMLQuantizerError(
            f"{where}: activation-only quantization (weight_dtype=float32 with "
            f"activation_dtype={config.activation_dtype}) is not supported: float weights "
            "leave the whole op unquantized. Quantize weights too, or set activation_dtype "
            "to float32 to skip the op."
        )
    if config.milestones is not None:
        warnings.warn(
            f"{where}: milestones={config.milestones} are ignored: they are a schedule for "
            "coremltools' LinearQuantizer.step(), which pt2e prepare/convert never calls. "
            "Enable / disable observers and fake quantization in your training loop instead.",
            IgnoredConfigFieldWarning,
            stacklevel=4,
        )
    for role, observer in (
        ("weight_observer", config.weight_observer),
        ("activation_observer", config.activation_observer),
    ):
        try:
            observer_class(
                observer, is_per_channel=role == "weight_observer" and config.weight_per_channel
            )
        except CoreMLQuantizerError as error:
            raise CoreMLQuantizerError(f"{where}: {role}: {error}") from None


def validate_config(config: Any) -> LinearQuantizerConfig:
    """Return ``config`` if the Core ML quantizer supports it, else raise `CoreMLQuantizerError`."""
    if config is None:
        raise CoreMLQuantizerError(
            "CoreMLQuantizer needs a config: pass coremltools' LinearQuantizerConfig() for the "
            "defaults (int8 weights per channel, uint8 activations, symmetric)."
        )
    if isinstance(config, ModuleLinearQuantizerConfig):
        raise CoreMLQuantizerError(
            "CoreMLQuantizer takes a LinearQuantizerConfig, got a ModuleLinearQuantizerConfig; "
            "wrap it: LinearQuantizerConfig(global_config=your_config)."
        )
    if not isinstance(config, LinearQuantizerConfig):
        raise CoreMLQuantizerError(
            f"CoreMLQuantizer takes a coremltools LinearQuantizerConfig, got {type(config).__name__}."
        )
    if config.non_traceable_module_names:
        warnings.warn(
            f"non_traceable_module_names={list(config.non_traceable_module_names)} is ignored: "
            "pt2e quantizes a model that is already exported.",
            IgnoredConfigFieldWarning,
            stacklevel=3,
        )
    _check_module_config("global_config", config.global_config)
    for module_type, module_config in config.module_type_configs.items():
        if isinstance(module_type, str):
            raise CoreMLQuantizerError(
                f"module_type_configs: {module_type!r} names no torch.nn module, torch function "
                "or operator, so it would never match; use a class such as torch.nn.Linear."
            )
        _check_module_config(f"module_type_configs[{module_type!r}]", module_config)
    for module_name, module_config in config.module_name_configs.items():
        _check_module_config(f"module_name_configs[{module_name!r}]", module_config)
    return config
