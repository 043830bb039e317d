"""lower_to_arm: quantize, partition, lower and serialize a model for an Arm target, with the fast pipeline."""

from __future__ import annotations

import contextlib
import hashlib
import io
import operator
import os
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import torch
from executorch.backends.arm.vgf import VgfBackend
from executorch.exir import to_edge_transform_and_lower
from executorch.exir.delegate import executorch_call_delegate
from torch.export import ExportedProgram
from torchao.quantization.pt2e.quantize_pt2e import convert_pt2e, prepare_pt2e

from lowerkit.arm_passes import _upstream
from lowerkit.arm_passes.accelerate import accelerated_arm_pipeline, accelerated_arm_quantization
from lowerkit.arm_passes.converter import converter_environment
from lowerkit.arm_passes.devices import (
    compile_spec_for,
    is_ethos_u,
    is_integer,
    is_vgf,
    partitioner_for,
    quantizer_for,
    supports_int16,
)
from lowerkit.arm_passes.errors import ArmLoweringError
from lowerkit.arm_passes.transposes import LayoutTransposes, layout_transposes
from lowerkit.pass_infra.accelerations.deferred_export import export_deferring_recompiles
from lowerkit.pass_infra.accelerations.patching import lowering_lock
from lowerkit.pass_infra.accelerations.settled_heap import settled_heap
from lowerkit.pass_infra.framework.pipeline import PipelineReport
from lowerkit.pass_infra.helpers import graph_ops
from lowerkit.pass_infra.helpers.inputs import example_input_tuple, require_model
from lowerkit.pass_infra.helpers.results import LoweredProgram

__all__ = ["ArmLowering", "fake_quantize", "lower_to_arm"]


@dataclass(frozen=True)
class ArmLowering(LoweredProgram):
    """The result of lower_to_arm: .pte bytes, TOSA flatbuffer(s), vela output(s), pipeline report(s);
    ``pte_sha256``, ``fully_delegated`` and ``save`` from ``LoweredProgram``."""

    target: str
    pte: bytes
    #: One TOSA flatbuffer per delegated partition, in lowering order.
    tosa_flatbuffers: tuple[bytes, ...]
    #: Ethos-U only: the vela-compiled delegate payload per partition (empty for TOSA targets).
    vela_binaries: tuple[bytes, ...]
    #: One PipelineReport per partition (empty when lowered with stock=True).
    reports: tuple[PipelineReport, ...]
    #: Operators left on the CPU (not delegated), e.g. ("aten::cumsum",); the quantize /
    #: dequantize conversions at the delegate's inputs and outputs are not counted.
    cpu_ops: tuple[str, ...] = ()
    vela_log: str = field(default="", repr=False)
    #: (scale, zero point) of the int8 quantize feeding each delegate input and of the
    #: dequantize after each delegate output (empty for float lowerings).
    input_qparams: tuple[tuple[float, int], ...] = ()
    output_qparams: tuple[tuple[float, int], ...] = ()
    #: The lowered program (delegate calls + CPU ops), as left by to_executorch.
    program: ExportedProgram | None = field(default=None, repr=False, compare=False)
    #: The program that was lowered: quantized (fake-quantized, runnable in torch) or float.
    source_program: ExportedProgram | None = field(default=None, repr=False, compare=False)
    #: The stock compile spec the program was lowered with (Ethos-U: its Vela flags).
    compile_spec: Any = field(default=None, repr=False, compare=False)
    #: ExecuTorch's EdgeProgramManager and ExecutorchProgramManager (for bundled programs, ETRecord).
    edge_manager: Any = field(default=None, repr=False, compare=False)
    executorch_manager: Any = field(default=None, repr=False, compare=False)
    #: Activations quantized to int16 (a16w8) rather than int8.
    a16w8: bool = False
    #: VGF only: the model converter's VGF payload per partition (empty for other targets).
    vgf_binaries: tuple[bytes, ...] = field(default=(), repr=False)
    #: The layout transposes, in the delegate and on the CPU, at the delegate boundary or inside.
    layout_transposes: LayoutTransposes = field(default_factory=LayoutTransposes)

    @property
    def report(self) -> PipelineReport | None:
        """The first partition's report (the usual single-partition case), or None."""
        return self.reports[0] if self.reports else None

    @property
    def tosa_sha256(self) -> tuple[str, ...]:
        """sha256 of each TOSA flatbuffer."""
        return tuple(hashlib.sha256(b).hexdigest() for b in self.tosa_flatbuffers)


def _export(model: Any, inputs: tuple[Any, ...], stock: bool) -> ExportedProgram:
    """`model` exported (unless `stock`, without generating code nothing runs: the same program)."""
    require_model(model, "lower_to_arm", ArmLoweringError)
    if isinstance(model, ExportedProgram):
        return model
    return torch.export.export(model, inputs) if stock else export_deferring_recompiles(model, inputs)


def fake_quantize(
    program: ExportedProgram,
    inputs: tuple[Any, ...],
    compile_spec: Any,
    calibration: Sequence[Sequence[Any]] | None,
    a16w8: bool = False,
    keep_float: Sequence[str] = (),
    stock: bool = False,
) -> torch.fx.GraphModule:
    """prepare_pt2e, calibrate, convert_pt2e: the fake-quantized module (before re-export).

    Runs under ``accelerated_arm_quantization()`` (the same module, bit for bit) unless `stock`.
    """
    samples = [tuple(s) for s in calibration] if calibration is not None else [inputs]
    if not samples:
        raise ArmLoweringError("calibration is empty; pass at least one input tuple (or None)")
    # check_guards=False: DecomposeLayerNormPass cannot take the _guards_fn call_module node.
    module = program.module(check_guards=False)
    with contextlib.nullcontext() if stock else accelerated_arm_quantization():
        prepared = prepare_pt2e(module, quantizer_for(compile_spec, a16w8=a16w8, keep_float=keep_float))
        with torch.no_grad():
            for sample in samples:
                prepared(*sample)
        return convert_pt2e(prepared)


_IO_CONVERSIONS = frozenset(
    {
        "quantized_decomposed::quantize_per_tensor",
        "quantized_decomposed::dequantize_per_tensor",
    }
)


def _delegate_io_conversion(node: Any) -> bool:
    """A quantize / dequantize at a delegate's input or output: part of the delegate's interface."""
    return graph_ops.op_name(node.target) in _IO_CONVERSIONS and _at_delegate_boundary(node)


def _at_delegate_boundary(node: Any) -> bool:
    """A quantize feeding only delegates, or a dequantize of a delegate output (via getitem)."""
    if all(u.target is executorch_call_delegate for u in node.users):
        return True
    source: Any = node.args[0] if node.args else None
    if getattr(source, "target", None) is operator.getitem:
        source = source.args[0]
    return getattr(source, "target", None) is executorch_call_delegate


def _boundary_qparams(
    program: ExportedProgram,
) -> tuple[tuple[tuple[float, int], ...], tuple[tuple[float, int], ...]]:
    inputs: list[tuple[float, int]] = []
    outputs: list[tuple[float, int]] = []
    for node in program.graph_module.graph.nodes:
        if node.op != "call_function" or not _at_delegate_boundary(node):
            continue
        name = graph_ops.op_name(node.target)
        if name == "quantized_decomposed::quantize_per_tensor":
            inputs.append((float(node.args[1]), int(node.args[2])))
        elif name == "quantized_decomposed::dequantize_per_tensor":
            outputs.append((float(node.args[1]), int(node.args[2])))
    return tuple(inputs), tuple(outputs)


def lower_to_arm(
    model_or_exported_program: torch.nn.Module | ExportedProgram,
    example_inputs: tuple[Any, ...],
    target: str,
    *,
    quantize: bool = True,
    calibration: Sequence[Sequence[Any]] | None = None,
    stock: bool = False,
    verify: bool = False,
    system_config: str | None = None,
    memory_mode: str | None = None,
    vela_config: str | os.PathLike[str] | None = None,
    a16w8: bool = False,
    keep_float: Sequence[str] = (),
) -> ArmLowering:
    """Lower a model to an Arm target (see ``ARM_TARGETS``: TOSA profiles, every Ethos-U configuration, VGF).

    INT, Ethos-U and vgf-int targets are quantized with the stock Arm quantizer first (calibrated on
    `calibration`, default the example inputs) unless `quantize` is False; TOSA-1.0+FP lowers
    in float, and so does vgf-fp. Ops TOSA cannot take stay on the CPU and are listed in ``cpu_ops``.
    `stock=True` runs ExecuTorch's own pipeline (the reference); `verify=True` re-runs every
    pass the stock way and raises on any difference. Ethos-U: `system_config`, `memory_mode`
    and `vela_config` (a Vela .ini) go to Vela as in ExecuTorch's ``EthosUCompileSpec``
    (unknown names raise, listing those the config has). `a16w8` quantizes activations to
    int16 (targets with the int16 extension; implied by "TOSA-1.0+INT+int16"). `keep_float`
    names modules (e.g. "features.3.0") the quantizer leaves in float; with none named the
    bytes are unchanged. VGF targets run Arm's ML SDK model converter (``converter.py`` finds it).

    Holds the process-wide lowering lock (torch / ExecuTorch cannot lower in several threads
    at once): concurrent calls run one after the other and give their sequential results.
    """
    with lowering_lock():
        compile_spec = _compile_spec(target, system_config, memory_mode, vela_config)
        # VGF: the converter is found (or its absence reported) before any work.
        converter = converter_environment() if is_vgf(target) else contextlib.nullcontext()
        with converter, contextlib.nullcontext() if stock else settled_heap():
            return _lower(model_or_exported_program, example_inputs, target, compile_spec,
                          quantize=quantize, calibration=calibration, stock=stock, verify=verify,
                          a16w8=_a16w8(target, a16w8), keep_float=keep_float)


def _a16w8(target: str, asked: bool) -> bool:
    if target == "TOSA-1.0+INT+int16":
        return True
    if asked and not supports_int16(target):
        raise ArmLoweringError(
            f"a16w8 needs a target with the int16 extension; {target!r} has none: use TOSA-1.0+INT+int16"
        )
    return asked


def _compile_spec(
    target: str, system_config: str | None, memory_mode: str | None, vela_config: str | os.PathLike[str] | None
) -> Any:
    ini = os.fspath(vela_config) if vela_config is not None else None
    spec = compile_spec_for(target, system_config=system_config, memory_mode=memory_mode, config_ini=ini)
    if is_ethos_u(target):
        from lowerkit.arm_passes.vela_config import check_vela_settings, vela_flag

        flags = spec.compiler_flags
        check_vela_settings(target, vela_flag(flags, "system-config"), vela_flag(flags, "memory-mode"), ini)
    return spec


def _lower(
    model_or_exported_program: torch.nn.Module | ExportedProgram,
    example_inputs: tuple[Any, ...],
    target: str,
    compile_spec: Any,
    *,
    quantize: bool,
    calibration: Sequence[Sequence[Any]] | None,
    stock: bool,
    verify: bool,
    a16w8: bool,
    keep_float: Sequence[str] = (),
) -> ArmLowering:
    inputs = example_input_tuple(example_inputs, ArmLoweringError)
    program = _export(model_or_exported_program, inputs, stock)
    if quantize and is_integer(target):
        converted = fake_quantize(program, inputs, compile_spec, calibration, a16w8, keep_float, stock=stock)
        program = _export(converted, inputs, stock)

    flatbuffers: list[bytes] = []
    tosa_programs: list[ExportedProgram] = []
    log = io.StringIO()
    with contextlib.ExitStack() as stack:
        stack.enter_context(_upstream.capture_tosa_flatbuffers(flatbuffers))
        stack.enter_context(_upstream.capture_tosa_programs(tosa_programs))
        reports: list[PipelineReport] = (
            [] if stock else stack.enter_context(accelerated_arm_pipeline(verify=verify))
        )
        if is_ethos_u(target):
            stack.enter_context(contextlib.redirect_stdout(log))
        edge = to_edge_transform_and_lower(program, partitioner=[partitioner_for(compile_spec)])
        lowered = edge.exported_program()
        cpu_ops = graph_ops.cpu_ops(lowered, ignore=_delegate_io_conversion)
        input_qparams, output_qparams = _boundary_qparams(lowered)
        transposes = layout_transposes(lowered, tosa_programs)
        executorch_program = edge.to_executorch()
        pte = bytes(executorch_program.buffer)
    vela = graph_ops.delegate_payloads(lowered, _upstream.ethosu_backend_id()) if is_ethos_u(target) else []
    vgf = graph_ops.delegate_payloads(lowered, VgfBackend.__name__) if is_vgf(target) else []
    return ArmLowering(
        target=target,
        pte=pte,
        tosa_flatbuffers=tuple(flatbuffers),
        vela_binaries=tuple(vela),
        reports=tuple(reports),
        cpu_ops=cpu_ops,
        vela_log=log.getvalue(),
        input_qparams=input_qparams,
        output_qparams=output_qparams,
        program=lowered,
        source_program=program,
        compile_spec=compile_spec,
        edge_manager=edge,
        executorch_manager=executorch_program,
        a16w8=a16w8 and quantize,
        vgf_binaries=tuple(vgf),
        layout_transposes=transposes,
    )
