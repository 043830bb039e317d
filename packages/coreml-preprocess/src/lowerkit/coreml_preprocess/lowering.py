"""lower_to_coreml: quantize as a recipe asks, partition, lower and serialize a model for Core ML."""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import AbstractContextManager
from dataclasses import dataclass, field, replace
from functools import cached_property
from typing import Any

import numpy as np
import torch
from executorch.exir import to_edge_transform_and_lower
from torch.export import ExportedProgram

from lowerkit.coreml_preprocess.capture import capturing_models
from lowerkit.coreml_preprocess.compression import (
    WEIGHT_THRESHOLD,
    WeightCompression,
    WeightDecision,
    collecting_decisions,
    unmatched_rules,
)
from lowerkit.coreml_preprocess.errors import CoreMLLoweringError, CoreMLOptionsError
from lowerkit.coreml_preprocess.options import CoreMLCompileOptions
from lowerkit.coreml_preprocess.partitioner import CoreMLPartitioner
from lowerkit.coreml_preprocess.quantize import palettize4, quantize_static_int8
from lowerkit.coreml_preprocess.recipes import (
    CoreMLRecipe,
    compile_options_for,
    get_recipe,
)
from lowerkit.coreml_preprocess.shapes import export_with_shapes
from lowerkit.coreml_preprocess.weights import constexpr_op_counts, decoded_weights
from lowerkit.pass_infra.accelerations.deferred_export import export_deferring_recompiles
from lowerkit.pass_infra.accelerations.lowering import accelerated_lowering
from lowerkit.pass_infra.accelerations.patching import lowering_lock
from lowerkit.pass_infra.helpers import graph_ops
from lowerkit.pass_infra.helpers.inputs import example_input_tuple, require_model
from lowerkit.pass_infra.helpers.results import LoweredProgram

__all__ = ["CoreMLLowering", "CoreMLPartitionReport", "Progress", "lower_to_coreml"]

#: A step timer / progress display: ``progress("export")`` wraps the step (e.g. a CLI spinner).
Progress = Callable[[str], AbstractContextManager[object]]

BACKEND_ID = "CoreMLBackend"


@dataclass(frozen=True)
class CoreMLPartitionReport:
    """One Core ML delegate: its payload size, spec version and compressed weight ops by type."""

    payload_bytes: int
    spec_version: int
    constexpr_ops: Mapping[str, int]


@dataclass(frozen=True)
class CoreMLLowering(LoweredProgram):
    """The result of lower_to_coreml: .pte bytes, the Core ML models preprocess converted, reports;
    ``pte_sha256``, ``fully_delegated`` and ``save`` from ``LoweredProgram``."""

    recipe: str
    options: CoreMLCompileOptions
    pte: bytes
    #: One coremltools ``MLModel`` per delegated partition, as preprocess converted it (its spec
    #: is the payload's), in lowering order.
    mlmodels: tuple[Any, ...] = field(repr=False)
    #: The delegate payloads (``processed_bytes``), in lowering order.
    payloads: tuple[bytes, ...] = field(repr=False)
    reports: tuple[CoreMLPartitionReport, ...]
    #: Operators left on the CPU (not delegated), e.g. ("aten.cumsum.default",).
    cpu_ops: tuple[str, ...] = ()
    #: What the caller may want to know (e.g. a weight-only recipe compressed nothing).
    warnings: tuple[str, ...] = ()
    #: The lowered program (delegate calls + CPU ops), as left by to_executorch.
    program: ExportedProgram | None = field(default=None, repr=False, compare=False)
    #: The program that was lowered: quantized (int8, palettize4) or float.
    source_program: ExportedProgram | None = field(default=None, repr=False, compare=False)
    #: int8 / palettize4: the quantized module, runnable in torch (for checks); else None.
    reference: torch.nn.Module | None = field(default=None, repr=False, compare=False)
    #: With weight compression: what it did with each float weight, all partitions.
    compression: tuple[WeightDecision, ...] = field(default=(), repr=False)

    @property
    def mlmodel(self) -> Any:
        """The first partition's MLModel (the usual single-partition case), or None."""
        return self.mlmodels[0] if self.mlmodels else None

    @cached_property
    def decoded_weights(self) -> tuple[dict[str, np.ndarray], ...]:
        """Per partition, the dense numpy value of every compressed (constexpr) weight; computed once."""
        return tuple(decoded_weights(m) for m in self.mlmodels)


@contextlib.contextmanager
def _untimed(_name: str) -> Iterator[None]:
    yield


def lower_to_coreml(
    model_or_exported_program: torch.nn.Module | ExportedProgram,
    example_inputs: tuple[Any, ...],
    recipe: str = "fp16",
    *,
    deployment_target: str | None = None,
    calibration: Sequence[Sequence[Any]] | None = None,
    pass_pipeline: str | Sequence[str] = "default",
    progress: Progress | None = None,
    weight_compression: WeightCompression | None = None,
    enumerated_shapes: Mapping[str, Sequence[Sequence[int]]] | None = None,
    keep_float: Sequence[str] = (),
    accelerate: bool = True,
) -> CoreMLLowering:
    """Lower a model to Core ML with a recipe: "fp16", "fp32", "int8", "w8", "w4", "palettize4".

    ``int8`` is calibrated on `calibration` (default: the example inputs); ``deployment_target``
    (e.g. "iOS18") defaults to the recipe's. Ops Core ML cannot take stay on the CPU and are
    listed in ``cpu_ops``. `progress` wraps each step (``progress(name)`` is a context manager).
    Bad recipes, targets or pass names raise ``CoreMLOptionsError`` before any work.
    ``weight_compression`` (e.g. ``recipe_file.load_recipe(path)``) compresses every weighted
    op with ``fp16`` / ``fp32``; a rule that selects no weight is a ``CoreMLOptionsError``.
    ``enumerated_shapes`` (``{input name: [shape, ...]}``, see ``shapes.parse_shapes``) exports
    the varying dimensions as dynamic and lowers the whole graph with Core ML enumerated shapes.
    ``keep_float`` names modules (e.g. "features.3") the int8 recipe leaves in float; with none
    named the bytes are unchanged. ExecuTorch's generic stages (``to_edge_transform_and_lower``,
    ``to_executorch``) run inside ``lowerkit.pass_infra.accelerated_lowering()``, same bytes;
    ``accelerate=False`` runs them stock.

    Holds the process-wide lowering lock: concurrent calls run one after the other.
    """
    chosen = get_recipe(recipe)
    options = compile_options_for(
        chosen, deployment_target=deployment_target, pass_pipeline=pass_pipeline,
        weight_compression=weight_compression,
    )
    if enumerated_shapes is not None:
        if chosen.torch_quantization is not None:
            raise CoreMLOptionsError(
                f"enumerated shapes work with recipes that quantize after conversion, not '{chosen.name}' "
                "(it quantizes in torch first)."
            )
        options = replace(options, enumerated_shapes=enumerated_shapes)
    require_model(model_or_exported_program, "lower_to_coreml", CoreMLLoweringError)
    inputs = example_input_tuple(example_inputs, CoreMLLoweringError)
    samples = [tuple(s) for s in calibration] if calibration is not None else [inputs]
    if keep_float and chosen.torch_quantization != "static_int8":
        raise CoreMLOptionsError(f"keep_float applies to the int8 recipe, not {chosen.name!r}")
    if chosen.calibrates and not samples:
        raise CoreMLLoweringError("calibration is empty; pass at least one input tuple (or None)")
    with lowering_lock():
        return _lower(
            model_or_exported_program, inputs, chosen, options, samples, progress or _untimed, tuple(keep_float),
            accelerated_lowering if accelerate else contextlib.nullcontext,
            export_deferring_recompiles if accelerate else torch.export.export,
        )  # fmt: skip


def _lower(
    model: torch.nn.Module | ExportedProgram,
    inputs: tuple[Any, ...],
    recipe: CoreMLRecipe,
    options: CoreMLCompileOptions,
    samples: list[tuple[Any, ...]],
    step: Progress,
    keep_float: tuple[str, ...] = (),
    generic_stages: Callable[[], AbstractContextManager[Any]] = contextlib.nullcontext,
    export: Callable[..., ExportedProgram] = torch.export.export,
) -> CoreMLLowering:
    warnings: list[str] = []
    if options.enumerated_shapes is not None and not isinstance(model, ExportedProgram):
        with step("export (enumerated shapes)"):
            program, reference = export_with_shapes(model, inputs, options.enumerated_shapes), None
    else:
        program, reference = _prepare(model, inputs, recipe, samples, step, warnings, keep_float, export)
    partitioner = CoreMLPartitioner(compile_specs=options, lower_full_graph=options.enumerated_shapes is not None)
    # One scope over both generic stages (as the drop-in is used): installed and removed once.
    with generic_stages():
        with step("lower to Core ML"), capturing_models() as mlmodels, collecting_decisions() as decisions:
            edge = to_edge_transform_and_lower(program, partitioner=[partitioner])
        if options.weight_compression is not None:
            unmatched = unmatched_rules(options.weight_compression, decisions)
            if unmatched:
                raise CoreMLOptionsError(
                    f"rule '{unmatched[0]}' selects no weight of the model; fix its match/regex/op_type or remove it."
                )
        with step("serialize"):
            pte = bytes(edge.to_executorch().buffer)
    lowered = edge.exported_program()
    payloads = graph_ops.delegate_payloads(lowered, BACKEND_ID)
    if (recipe.weight_config is not None or options.weight_compression is not None) and not any(
        t.is_floating_point() and t.numel() > WEIGHT_THRESHOLD for t in program.state_dict.values()
    ):
        warnings.append(
            f"no weight has more than {WEIGHT_THRESHOLD} elements, so Core ML compressed none "
            f"({recipe.name} leaves small weights as they are)"
        )
    reports = tuple(
        CoreMLPartitionReport(len(p), int(m.get_spec().specificationVersion), constexpr_op_counts(m))
        for p, m in zip(payloads, mlmodels, strict=True)
    )
    return CoreMLLowering(
        recipe=recipe.name, options=options, pte=pte, mlmodels=tuple(mlmodels), payloads=tuple(payloads),
        reports=reports, cpu_ops=graph_ops.cpu_ops(lowered), warnings=tuple(warnings), program=lowered,
        source_program=program, reference=reference, compression=tuple(decisions),
    )


def _prepare(
    model: torch.nn.Module | ExportedProgram,
    inputs: tuple[Any, ...],
    recipe: CoreMLRecipe,
    samples: list[tuple[Any, ...]],
    step: Progress,
    warnings: list[str],
    keep_float: tuple[str, ...] = (),
    export: Callable[..., ExportedProgram] = torch.export.export,
) -> tuple[ExportedProgram, torch.nn.Module | None]:
    """The program to lower (quantized by the recipe's torch step, if any) and its torch reference
    (`export`: ``torch.export.export`` or a function giving the same program)."""
    if recipe.torch_quantization == "palettize4":
        eager = model.module() if isinstance(model, ExportedProgram) else model
        with step("palettize (4-bit codebook)"):
            palettized, count = palettize4(eager)
        if not count:
            warnings.append(
                "palettize4 found no torch.nn.Linear layer, so nothing was palettized "
                "(an ExportedProgram has none: pass the eager module)"
            )
        with step("export palettized"):
            return export(palettized, inputs), palettized
    with step("export"):
        program = model if isinstance(model, ExportedProgram) else export(model, inputs)
    if recipe.torch_quantization != "static_int8":
        return program, None
    with step("quantize (pt2e static int8)"):
        converted = quantize_static_int8(program, samples, keep_float)
    with step("export quantized"):
        return export(converted, inputs), converted
