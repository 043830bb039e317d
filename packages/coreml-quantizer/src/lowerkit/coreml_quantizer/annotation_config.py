"""Per-op quantization specs derived from a coremltools ``ModuleLinearQuantizerConfig``."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import torch
from coremltools.optimize.torch.quantization import (
    ModuleLinearQuantizerConfig,
    ObserverType,
    QuantizationScheme,
)
from torchao.quantization.pt2e.fake_quantize import FakeQuantize
from torchao.quantization.pt2e.observer import (
    MinMaxObserver,
    MovingAverageMinMaxObserver,
    MovingAveragePerChannelMinMaxObserver,
    PerChannelMinMaxObserver,
)
from torchao.quantization.pt2e.quantizer import QuantizationSpec

from lowerkit.coreml_quantizer.errors import CoreMLQuantizerError

_OBSERVERS: dict[str, type] = {
    "moving_average_min_max": MovingAverageMinMaxObserver,
    "min_max": MinMaxObserver,
    "moving_average_min_max_per_channel": MovingAveragePerChannelMinMaxObserver,
    "min_max_per_channel": PerChannelMinMaxObserver,
}

#: pt2e quantizes to uint8 / int8 only: the quantized dtypes map onto them.
_DTYPE_MAP: dict[torch.dtype, torch.dtype] = {
    torch.quint8: torch.uint8,
    torch.qint8: torch.int8,
}


def observer_class(observer_type: ObserverType, is_per_channel: bool) -> type:
    """The torchao observer class for a coremltools observer type."""
    name = observer_type.value + ("_per_channel" if is_per_channel else "")
    if name not in _OBSERVERS:
        supported = sorted({key.removesuffix("_per_channel") for key in _OBSERVERS})
        raise CoreMLQuantizerError(
            f"Unsupported observer type: {name}. The Core ML pt2e quantizer supports "
            f"observers {supported}; set weight_observer / activation_observer to one of them."
        )
    return _OBSERVERS[name]


def _qspec(observer: type, dtype: torch.dtype, qscheme: torch.qscheme) -> QuantizationSpec:
    return QuantizationSpec(
        observer_or_fake_quant_ctr=FakeQuantize.with_args(
            observer=observer, dtype=dtype, qscheme=qscheme
        ),
        dtype=dtype,
        qscheme=qscheme,
    )


@dataclass
class AnnotationConfig:
    """Quantization specs for an op's input activation, output activation and weight."""

    input_activation: Any = None
    output_activation: Any = None
    weight: Any = None

    @classmethod
    def from_quantization_config(
        cls, quantization_config: ModuleLinearQuantizerConfig | None
    ) -> AnnotationConfig | None:
        """The specs for a module config; None when it leaves ops unquantized (as ExecuTorch's)."""
        if quantization_config is None or quantization_config.weight_dtype == torch.float32:
            return None

        if quantization_config.activation_dtype == torch.float32:
            activation_qspec = None
        else:
            activation_qscheme = QuantizationScheme.get_qscheme(
                quantization_config.quantization_scheme, is_per_channel=False
            )
            activation_dtype = _DTYPE_MAP.get(
                quantization_config.activation_dtype, quantization_config.activation_dtype
            )
            activation_qspec = _qspec(
                observer_class(quantization_config.activation_observer, is_per_channel=False),
                activation_dtype,
                activation_qscheme,
            )

        weight_qscheme = QuantizationScheme.get_qscheme(
            quantization_config.quantization_scheme,
            is_per_channel=quantization_config.weight_per_channel,
        )
        weight_dtype = _DTYPE_MAP.get(
            quantization_config.weight_dtype, quantization_config.weight_dtype
        )
        weight_qspec = _qspec(
            observer_class(
                quantization_config.weight_observer,
                is_per_channel=quantization_config.weight_per_channel,
            ),
            weight_dtype,
            weight_qscheme,
        )
        return cls(
            input_activation=activation_qspec,
            output_activation=activation_qspec,
            weight=weight_qspec,
        )
