"""Lower to ExecuTorch with the Arm TOSA / Ethos-U / VGF delegate, through lowerkit.arm_passes."""

from __future__ import annotations

import json
from typing import Any

from lowerkit.cli.errors import LoweringError, UsageError
from lowerkit.cli.model_source import Inputs, ModelSource
from lowerkit.cli.options import LowerOptions
from lowerkit.cli.progress import Steps
from lowerkit.cli.result import Lowered
from lowerkit.cli.targets import ETHOS_U_CONFIGS

#: CLI target name -> lowerkit.arm_passes target name.
ARM_TARGET_NAMES = {
    "tosa-int": "TOSA-1.0+INT",
    "tosa-fp": "TOSA-1.0+FP",
    "tosa-int16": "TOSA-1.0+INT+int16",
    **{f"ethos-u{npu}-{macs}": f"ethos-u{npu}-{macs}" for npu, macs in ETHOS_U_CONFIGS},
    "vgf-int": "vgf-int",
    "vgf-fp": "vgf-fp",
}


def _lower_to_arm(source: ModelSource, options: LowerOptions, calibration: list[Inputs]) -> Any:
    from lowerkit.arm_passes import ArmLoweringError, lower_to_arm

    model = source.module if source.module is not None else source.export()
    try:
        return lower_to_arm(
            model,
            source.example_inputs,
            ARM_TARGET_NAMES[options.target.name],
            quantize=options.target.calibrates,
            calibration=calibration or None,
            system_config=options.system_config,
            memory_mode=options.memory_mode,
            vela_config=options.vela_config,
            a16w8=options.a16w8,
            keep_float=options.keep_float,
        )
    except ArmLoweringError as error:
        text = str(error)
        if text.startswith(("unknown system config", "unknown memory mode", "Vela config", "a16w8 needs")):
            raise UsageError(text) from None
        if text.startswith(("the VGF targets need", "MODEL_CONVERTER_PATH=")):
            raise LoweringError(text) from None  # the converter is missing: one line with the fix
        raise


def lower(source: ModelSource, options: LowerOptions, *, calibration: list[Inputs], steps: Steps) -> Lowered:
    """Quantize (INT / Ethos-U / vgf-int), run the fast Arm pipeline, serialize a .pte; Ethos-U: Vela's NPU report."""
    target = options.target
    with steps.step(f"lower to {ARM_TARGET_NAMES[target.name]}"):
        lowering = _lower_to_arm(source, options, calibration)
    lowered = Lowered(model=source.name, target=target, pte=lowering.pte, seconds=steps.seconds)
    lowered.tosa = {f"partition{i}.tosa": fb for i, fb in enumerate(lowering.tosa_flatbuffers)}
    lowered.cpu_ops = list(lowering.cpu_ops)
    lowered.passes = [
        {"partition": index, **row}
        for index, report in enumerate(lowering.reports)
        for row in json.loads(report.to_json())["passes"]
    ]
    lowered.reference = lowering
    if lowered.cpu_ops:
        lowered.warnings.append(
            f"partial delegation: these ops stay on the CPU: {', '.join(lowered.cpu_ops)} (ExecuTorch's Arm "
            "partitioner does not take them); replace them with supported ops to keep the model on the accelerator"
        )
    if lowering.vela_binaries:
        with steps.step("NPU report (Vela)"):
            _npu(lowered, lowering, options)
    if options.bundle_path is not None:
        from lowerkit.arm_passes.bundle import bundled_program

        with steps.step("bundle"):
            inputs = [source.example_inputs, *calibration]
            lowered.extras["bundle"] = bundled_program(lowering, inputs)
    if options.etrecord_path is not None:
        from lowerkit.arm_passes.bundle import etrecord

        with steps.step("etrecord"):
            lowered.extras["etrecord"] = etrecord(lowering)
    return lowered


def _npu(lowered: Lowered, lowering: Any, options: LowerOptions) -> None:
    """Read Vela's report, add the pre-flight warnings, and enforce the budgets (nothing written yet)."""
    from lowerkit.arm_passes.npu_report import npu_reports
    from lowerkit.arm_passes.preflight import BudgetExceededError, channel_warnings, check_budgets
    from lowerkit.arm_passes.vela_config import read_vela_config
    from lowerkit.cli.npu import npu_section

    reports = npu_reports(lowering)
    limits = read_vela_config(options.vela_config).arena_cache_sizes
    lowered.npu = npu_section(
        reports, lowered.cpu_ops, limits.get(reports[0].memory_mode), lowering.layout_transposes
    )
    for warning in channel_warnings(lowering.source_program, options.target.name):
        lowered.warnings.append(f"channels: {warning.message(options.target.name)}")
    for report in reports:
        for layer in report.cpu_layers():
            lowered.warnings.append(
                f"ops leaving the NPU: Vela runs {layer.tosa_op} '{layer.name}' on the CPU; "
                "see the op mapping in --report"
            )
    try:
        check_budgets(reports, sram_budget=options.sram_budget, flash_budget=options.flash_budget)
    except BudgetExceededError as error:
        raise LoweringError(str(error)) from None
