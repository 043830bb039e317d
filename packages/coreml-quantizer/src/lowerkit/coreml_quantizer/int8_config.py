"""The static int8 config of ExecuTorch's Core ML flows, defined once for every side that quantizes.

Symmetric, per-channel int8 weights and uint8 activations: what ExecuTorch's
``coreml_static_int8`` flow and lowerkit's ``int8`` recipe pass to a ``CoreMLQuantizer``
(ExecuTorch's or lowerkit's). Importing it loads no Core ML backend, so a process holding
ExecuTorch's backend (a stock side) can use it too.
"""

from __future__ import annotations

from collections.abc import Sequence

import torch
from coremltools.optimize.torch.quantization.quantization_config import (
    LinearQuantizerConfig,
    QuantizationScheme,
)

__all__ = ["static_int8_config"]


def static_int8_config(keep_float: Sequence[str] = ()) -> LinearQuantizerConfig:
    """The static int8 ``LinearQuantizerConfig``; the modules named in `keep_float` stay in float."""
    return LinearQuantizerConfig.from_dict(
        {
            "global_config": {
                "quantization_scheme": QuantizationScheme.symmetric,
                "activation_dtype": torch.quint8,
                "weight_dtype": torch.qint8,
                "weight_per_channel": True,
            },
            **({"module_name_configs": dict.fromkeys(keep_float)} if keep_float else {}),
        }
    )
