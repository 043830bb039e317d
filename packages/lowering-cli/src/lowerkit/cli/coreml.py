"""Lower to ExecuTorch with the Core ML delegate, through lowerkit's Core ML packages."""

from __future__ import annotations

import copy
from typing import TYPE_CHECKING

import torch

from lowerkit.cli.errors import LoweringError, UsageError
from lowerkit.cli.model_source import Inputs, ModelSource
from lowerkit.cli.progress import Steps
from lowerkit.cli.result import Lowered
from lowerkit.cli.targets import Target

if TYPE_CHECKING:
    from lowerkit.coreml_preprocess import CoreMLCompileOptions

_WEIGHT_CONFIGS: dict[str, dict[str, object]] = {
    "coreml-w8": {"mode": "linear_symmetric", "dtype": "int8", "granularity": "per_channel"},
    "coreml-w4": {
        "mode": "linear_symmetric",
        "dtype": "int4",
        "granularity": "per_block",
        "block_size": 32,
    },
}
#: coremltools compresses only weights with more elements than this (its `weight_threshold`).
COREML_WEIGHT_THRESHOLD = 2048
_DEPLOYMENT = {"coreml-int8": "iOS17", "coreml-w8": "iOS17", "coreml-w4": "iOS18", "coreml-palettize4": "iOS18"}


def compile_options(target: Target, pass_names: list[str] | None) -> CoreMLCompileOptions:
    """The CoreMLCompileOptions for `target`; a UsageError for a bad MIL pass name."""
    import coremltools as ct

    from lowerkit.coreml_preprocess import CoreMLCompileOptions, CoreMLOptionsError

    try:
        return CoreMLCompileOptions(
            compute_precision=ct.precision.FLOAT32 if target.name == "coreml-fp32" else ct.precision.FLOAT16,
            minimum_deployment_target=_DEPLOYMENT.get(target.name),
            op_linear_quantizer_config=_WEIGHT_CONFIGS.get(target.name),
            pass_pipeline=tuple(pass_names) if pass_names is not None else "default",
        )
    except CoreMLOptionsError as error:  # PassPipelineError included
        raise UsageError(str(error)) from None


def lower(
    source: ModelSource,
    target: Target,
    *,
    calibration: list[Inputs],
    pass_names: list[str] | None,
    steps: Steps,
) -> Lowered:
    """Quantize as the target asks, partition to Core ML and serialize a .pte."""
    from executorch.exir import to_edge_transform_and_lower

    from lowerkit.coreml_preprocess import CoreMLPartitioner

    options = compile_options(target, pass_names)
    with steps.step("export"):
        exported = source.export()
    reference: torch.nn.Module | None = None
    if target.name == "coreml-int8":
        exported, reference = _quantize_static(exported, source, calibration, steps)
    elif target.name == "coreml-palettize4":
        exported, reference = _palettize(source, steps)
    with steps.step("lower to Core ML"):
        edge = to_edge_transform_and_lower(exported, partitioner=[CoreMLPartitioner(compile_specs=options)])
    with steps.step("serialize"):
        program = edge.to_executorch()
    lowered = Lowered(model=source.name, target=target, pte=bytes(program.buffer), seconds=steps.seconds)
    if target.name in _WEIGHT_CONFIGS and not any(
        t.is_floating_point() and t.numel() > COREML_WEIGHT_THRESHOLD for t in exported.state_dict.values()
    ):
        lowered.warnings.append(
            f"no weight has more than {COREML_WEIGHT_THRESHOLD} elements, so Core ML compressed none "
            f"({target.name} leaves small weights as they are)"
        )
    lowered.cpu_ops = _cpu_ops(edge.exported_program().graph_module)
    lowered.reference = reference
    return lowered


def _quantize_static(
    exported: torch.export.ExportedProgram,
    source: ModelSource,
    calibration: list[Inputs],
    steps: Steps,
) -> tuple[torch.export.ExportedProgram, torch.nn.Module]:
    """The quantized program, and the converted module it was exported from (for --verify)."""
    from coremltools.optimize.torch.quantization.quantization_config import (
        LinearQuantizerConfig,
        QuantizationScheme,
    )
    from torchao.quantization.pt2e.quantize_pt2e import convert_pt2e, prepare_pt2e

    from lowerkit.coreml_quantizer import CoreMLQuantizer

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
        try:
            with torch.no_grad():
                for batch in calibration:
                    prepared(*batch)
        except AssertionError:  # torchao's observers assert on the ranges they compute
            _check_finite_ranges(prepared)
            raise
        _check_finite_ranges(prepared)
        converted = convert_pt2e(prepared)
    with steps.step("export quantized"):
        return torch.export.export(converted, source.example_inputs), converted


def _check_finite_ranges(prepared: torch.fx.GraphModule) -> None:
    """Fail clearly when calibration saw ±inf or NaN where int8 needs a finite range."""
    for node in prepared.graph.nodes:
        observer = getattr(prepared, str(node.target), None) if node.op == "call_module" else None
        # A fake-quantize module wraps the observer that holds the range.
        observer = getattr(observer, "activation_post_process", observer)
        low, high = getattr(observer, "min_val", None), getattr(observer, "max_val", None)
        if not isinstance(low, torch.Tensor) or not isinstance(high, torch.Tensor) or low.numel() == 0:
            continue
        if bool(torch.isfinite(low).all()) and bool(torch.isfinite(high).all()):
            continue
        observed = node.args[0] if node.args else node
        raise LoweringError(
            f"calibration saw a non-finite value in `{observed}` (min {float(low.min())}, max {float(high.max())}), "
            "which int8 cannot represent; use a finite mask (e.g. masked_fill before softmax instead of adding "
            "-inf) or a weight-only target (coreml-w8, coreml-w4)"
        )


#: Input columns that share one 4-bit lookup table, where a linear layer's width allows it.
PALETTE_GROUP = 16


def _palettize(source: ModelSource, steps: Steps) -> tuple[torch.export.ExportedProgram, torch.nn.Module]:
    """Palettize every linear layer to 4 bits, one table per 16 input columns (else per weight).

    Returns the program and the palettized eager module it was exported from (for --verify).
    """
    from torchao.prototype.quantization.codebook_coreml import CodebookWeightOnlyConfig
    from torchao.quantization import quantize_

    def grouped(module: torch.nn.Module, _fqn: str) -> bool:
        return isinstance(module, torch.nn.Linear) and module.in_features % PALETTE_GROUP == 0

    def ungrouped(module: torch.nn.Module, _fqn: str) -> bool:
        return isinstance(module, torch.nn.Linear) and module.in_features % PALETTE_GROUP != 0

    with steps.step("palettize (4-bit codebook)"):
        module = copy.deepcopy(source.eager())
        quantize_(module, CodebookWeightOnlyConfig(dtype=torch.uint4, block_size=[-1, PALETTE_GROUP]), grouped)
        quantize_(module, CodebookWeightOnlyConfig(dtype=torch.uint4, block_size=[-1, -1]), ungrouped)
    with steps.step("export palettized"):
        return torch.export.export(module, source.example_inputs), module


def _cpu_ops(graph_module: torch.fx.GraphModule) -> list[str]:
    ops = set()
    for node in graph_module.graph.nodes:
        if node.op == "call_function" and "executorch_call_delegate" not in str(node.target):
            name = getattr(node.target, "__name__", str(node.target))
            if name != "getitem":
                ops.add(name)
    return sorted(ops)
