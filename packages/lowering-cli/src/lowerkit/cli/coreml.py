"""Lower to ExecuTorch with the Core ML delegate."""

from __future__ import annotations

import coremltools as ct
import torch

from lowerkit.cli.model_source import Inputs, ModelSource
from lowerkit.cli.progress import Steps
from lowerkit.cli.result import Lowered
from lowerkit.cli.targets import Target

_WEIGHT_CONFIGS: dict[str, dict[str, object]] = {
    "coreml-w8": {"mode": "linear_symmetric", "dtype": "int8", "granularity": "per_channel"},
    "coreml-w4": {
        "mode": "linear_symmetric",
        "dtype": "int4",
        "granularity": "per_block",
        "block_size": 32,
    },
}


def lower(
    source: ModelSource,
    target: Target,
    *,
    calibration: list[Inputs],
    pass_names: list[str] | None,
    steps: Steps,
) -> Lowered:
    """Quantize as the target asks, partition to Core ML and serialize a .pte."""
    from executorch.backends.apple.coreml.compiler import CoreMLBackend
    from executorch.backends.apple.coreml.partition import CoreMLPartitioner
    from executorch.exir import to_edge_transform_and_lower

    precision = ct.precision.FLOAT32 if target.name == "coreml-fp32" else ct.precision.FLOAT16
    deployment = None
    with steps.step("export"):
        exported = source.export()
    if target.name == "coreml-int8":
        exported = _quantize_static(exported, source, calibration, steps)
        deployment = ct.target.iOS17
    elif target.name == "coreml-palettize4":
        exported = _palettize(source, steps)
        deployment = ct.target.iOS18
    elif target.name in _WEIGHT_CONFIGS:
        deployment = ct.target.iOS18 if target.name == "coreml-w4" else ct.target.iOS17
    specs = CoreMLBackend.generate_compile_specs(
        compute_precision=precision,
        minimum_deployment_target=deployment,
        op_linear_quantizer_config=_WEIGHT_CONFIGS.get(target.name),
        pass_names=pass_names,
    )
    with steps.step("lower to Core ML"):
        edge = to_edge_transform_and_lower(exported, partitioner=[CoreMLPartitioner(compile_specs=specs)])
    with steps.step("serialize"):
        program = edge.to_executorch()
    return Lowered(model=source.name, target=target, pte=bytes(program.buffer), seconds=steps.seconds)


def _quantize_static(
    exported: torch.export.ExportedProgram,
    source: ModelSource,
    calibration: list[Inputs],
    steps: Steps,
) -> torch.export.ExportedProgram:
    from coremltools.optimize.torch.quantization.quantization_config import (
        LinearQuantizerConfig,
        QuantizationScheme,
    )
    from executorch.backends.apple.coreml.quantizer import CoreMLQuantizer
    from torchao.quantization.pt2e.quantize_pt2e import convert_pt2e, prepare_pt2e

    config = LinearQuantizerConfig.from_dict(
        {
            "global_config": {
                "quantization_scheme": QuantizationScheme.symmetric,
                "activation_dtype": torch.quint8,
                "weight_dtype": torch.qint8,
                "weight_per_channel": True,
            }
        }
    )
    with steps.step("quantize (pt2e static int8)"):
        prepared = prepare_pt2e(exported.module(), CoreMLQuantizer(config))
        for batch in calibration:
            prepared(*batch)
        converted = convert_pt2e(prepared)
    with steps.step("export quantized"):
        return torch.export.export(converted, source.example_inputs)


def _palettize(source: ModelSource, steps: Steps) -> torch.export.ExportedProgram:
    from torchao.prototype.quantization.codebook_coreml import CodebookWeightOnlyConfig
    from torchao.quantization import quantize_

    with steps.step("palettize (4-bit codebook)"):
        module = source.eager()
        quantize_(module, CodebookWeightOnlyConfig(dtype=torch.uint4, block_size=[-1, 16]))
    with steps.step("export palettized"):
        return torch.export.export(module, source.example_inputs)
