"""The Arm backend: TOSA, Ethos-U and VGF targets, lowered through lowerkit.arm_passes."""

from __future__ import annotations

import json
from collections.abc import Iterator, Mapping
from contextlib import AbstractContextManager, contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any

from lowerkit.cli.backend import Backend, DebugRequest, Given
from lowerkit.cli.backends.arm import inspection
from lowerkit.cli.backends.arm.options import OPTIONS, ArmSettings
from lowerkit.cli.backends.arm.targets import (
    ARM_TARGET_NAMES,
    FAMILY,
    TARGET_TABLE,
    is_ethos_u,
    kind,
    llm_overrides,
)
from lowerkit.cli.errors import LoweringError, UsageError
from lowerkit.cli.options import LowerOptions, Target
from lowerkit.cli.progress import Steps
from lowerkit.cli.result import Lowered

if TYPE_CHECKING:
    from lowerkit.cli.sources.model import Inputs, ModelSource

#: Where `Lowered.extras` keeps the TOSA flatbuffers (`--tosa-dir` writes them).
_TOSA = "tosa/"


class ArmBackend(Backend):
    """TOSA flatbuffers, Ethos-U (Vela) and VGF programs through lowerkit.arm_passes."""

    family = FAMILY
    title = "Arm"
    preload = ("lowerkit.arm_passes", "lowerkit.cli.backends.arm.npu", "lowerkit.cli.backends.arm.verify")
    toolchain = ("tosa-tools", "ethos-u-vela", "ai-ml-sdk-model-converter")
    libraries = ("tosa_serializer", "ethosu")
    lowerkit_packages = (("lowerkit-arm-passes", "arm_passes"),)
    verification_figures = (("sqnr_db", "SQNR"),)
    targets = tuple(Target(row.name, FAMILY, row.summary, row.calibrates) for row in TARGET_TABLE)
    options = OPTIONS
    settings_type = ArmSettings
    decoders = (inspection.VELA,)
    demo = (("ds_cnn", "tosa-int"), ("cnn9_layernorm", "ethos-u55-128"))

    def llm_overrides(self, target: Target) -> dict[str, Any] | None:
        """See `Backend.llm_overrides` (the target table's row says)."""
        return llm_overrides(target)

    def llm_export_scope(self, config: Any) -> AbstractContextManager[None] | None:
        """TOSA, Ethos-U or VGF enabled: arm-passes' drop-in accelerators (same bytes)."""
        arm = config.backend
        if not (arm.tosa.enabled or arm.ethosu.enabled or arm.vgf.enabled):
            return None
        return _arm_drop_in(vgf=arm.vgf.enabled)

    def lower(self, source: ModelSource, options: LowerOptions, *, calibration: list[Inputs], steps: Steps) -> Lowered:
        """Quantize (INT / Ethos-U / vgf-int), run the fast Arm pipeline, serialize a .pte; Ethos-U: Vela's NPU report."""
        target = options.target
        settings: ArmSettings = self.settings_of(options)
        with steps.step(f"lower to {ARM_TARGET_NAMES[target.name]}"):
            lowering = _lower_to_arm(source, options, settings, calibration)
        lowered = Lowered(model=source.name, target=target, pte=lowering.pte, seconds=steps.seconds)
        tosa = {f"partition{i}.tosa": fb for i, fb in enumerate(lowering.tosa_flatbuffers)}
        lowered.extras.update({_TOSA + name: flatbuffer for name, flatbuffer in tosa.items()})
        lowered.report["tosa_bytes"] = {name: len(flatbuffer) for name, flatbuffer in tosa.items()}
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
                _npu(lowered, lowering, target, settings)
        if settings.bundle_path is not None:
            from lowerkit.arm_passes.bundle import bundled_program

            with steps.step("bundle"):
                inputs = [source.example_inputs, *calibration]
                lowered.extras["bundle"] = bundled_program(lowering, inputs)
        if settings.etrecord_path is not None:
            from lowerkit.arm_passes.bundle import etrecord

            with steps.step("etrecord"):
                lowered.extras["etrecord"] = etrecord(lowering)
        return lowered

    def verify(self, lowered: Lowered, source: ModelSource) -> dict[str, Any]:
        """The TOSA flatbuffers run on tosa-tools' reference model, compared with torch."""
        from lowerkit.cli.backends.arm.verify import verify_arm

        return verify_arm(lowered, source)

    def debuggable(self, target: Target) -> bool:
        """Every Arm target: `debug` compares its TOSA graph with the fake-quant program."""
        return True

    def debug(self, source: ModelSource, target: Target, request: DebugRequest) -> Any:
        """lowerkit.arm_passes' layer-by-layer report (threshold in output quanta, default 1)."""
        from lowerkit.arm_passes.numerics.debug import NoQuantizedLayerError, debug_arm

        model = source.module if source.module is not None else source.export()
        try:
            return debug_arm(
                model, source.example_inputs, ARM_TARGET_NAMES[target.name], calibration=request.calibration or None,
                keep_float=request.keep_float, threshold_quanta=1.0 if request.threshold is None else request.threshold,
                scan=request.scan, model_name=source.name, bisect=True if request.given.get("--bisect") else None,
                target_sqnr_db=request.target_sqnr, search=request.search,
            )
        except NoQuantizedLayerError as error:
            raise UsageError(str(error)) from None

    def pattern(self, target: Target) -> str | None:
        """"ethos-u*" for the Ethos-U targets."""
        return "ethos-u*" if is_ethos_u(target) else None

    def cache_key_extras(self, target: Target) -> dict[str, str]:
        """The VGF targets: the model converter they run (`cache_key.converter_fingerprint`)."""
        if kind(target) != "vgf":
            return {}
        from lowerkit.cli.backends.arm.cache_key import converter_fingerprint

        return {"model-converter": converter_fingerprint()}

    def write_outputs(self, lowered: Lowered, options: LowerOptions, given: Given) -> list[str]:
        """The bundled program, the ETRecord and the TOSA flatbuffers (--tosa-dir), where asked."""
        from lowerkit.pass_infra.helpers.files import write_bytes_atomically

        settings: ArmSettings = self.settings_of(options)
        lines = []
        for extra, path, what in (
            ("bundle", settings.bundle_path, "bundled program"), ("etrecord", settings.etrecord_path, "ETRecord"),
        ):
            if path is not None:
                write_bytes_atomically(path, lowered.extras[extra])
                lines.append(f"wrote {path} ({path.stat().st_size:,} bytes, {what})")
        tosa_dir: Path | None = given.get("--tosa-dir")
        if tosa_dir is not None:
            tosa_dir.mkdir(parents=True, exist_ok=True)
            for name, flatbuffer in lowered.extras.items():
                if name.startswith(_TOSA):
                    write_bytes_atomically(tosa_dir / name.removeprefix(_TOSA), flatbuffer)
        return lines

    def result_lines(self, lowered: Lowered) -> list[str]:
        """Ethos-U: Vela's NPU report, without the per-layer table."""
        if not lowered.report.get("npu"):
            return []
        from lowerkit.cli.backends.arm.npu import render

        return list(render(lowered.report["npu"], layers=False))

    def report_lines(self, report: Mapping[str, Any]) -> list[str]:
        """Ethos-U: the report's NPU section, with the per-layer table."""
        return inspection.report_lines(report)

    def report_figures(self, report: Mapping[str, Any]) -> dict[str, Any]:
        """Ethos-U: Vela's cycles, memory and layers."""
        return inspection.report_figures(report)


def _lower_to_arm(source: ModelSource, options: LowerOptions, settings: ArmSettings, calibration: list[Inputs]) -> Any:
    from lowerkit.arm_passes.errors import ArmLoweringError
    from lowerkit.arm_passes.lowering import lower_to_arm

    model = source.module if source.module is not None else source.export()
    try:
        return lower_to_arm(
            model,
            source.example_inputs,
            ARM_TARGET_NAMES[options.target.name],
            quantize=options.target.calibrates,
            calibration=calibration or None,
            system_config=settings.system_config,
            memory_mode=settings.memory_mode,
            vela_config=settings.vela_config,
            a16w8=settings.a16w8,
            keep_float=options.keep_float,
        )
    except ArmLoweringError as error:
        text = str(error)
        if text.startswith(("unknown system config", "unknown memory mode", "Vela config", "a16w8 needs")):
            raise UsageError(text) from None
        if text.startswith(("the VGF targets need", "MODEL_CONVERTER_PATH=")):
            raise LoweringError(text) from None  # the converter is missing: one line with the fix
        raise


def _npu(lowered: Lowered, lowering: Any, target: Target, settings: ArmSettings) -> None:
    """Read Vela's report, add the pre-flight warnings, and enforce the budgets (nothing written yet)."""
    from lowerkit.arm_passes.npu_report import npu_reports
    from lowerkit.arm_passes.preflight import BudgetExceededError, channel_warnings, check_budgets
    from lowerkit.arm_passes.vela_config import read_vela_config
    from lowerkit.cli.backends.arm.npu import npu_section

    reports = npu_reports(lowering)
    limits = read_vela_config(settings.vela_config).arena_cache_sizes
    lowered.report["npu"] = npu_section(
        reports, lowered.cpu_ops, limits.get(reports[0].memory_mode), lowering.layout_transposes
    )
    for warning in channel_warnings(lowering.source_program, target.name):
        lowered.warnings.append(f"channels: {warning.message(target.name)}")
    for report in reports:
        for layer in report.cpu_layers():
            lowered.warnings.append(
                f"ops leaving the NPU: Vela runs {layer.tosa_op} '{layer.name}' on the CPU; "
                "see the op mapping in --report"
            )
    try:
        check_budgets(reports, sram_budget=settings.sram_budget, flash_budget=settings.flash_budget)
    except BudgetExceededError as error:
        raise LoweringError(str(error)) from None


#: The Arm backend (registered in `targets`).
ARM = ArmBackend()


@contextmanager
def _arm_drop_in(vgf: bool) -> Iterator[None]:
    """arm-passes' drop-in accelerators for ExecuTorch's own Arm flow (quantizer and pipeline); for
    VGF, ExecuTorch's backend finds the installed model converter (as ``lower -t vgf-*``)."""
    from lowerkit.arm_passes.accelerate import (
        accelerated_arm_pipeline,
        accelerated_arm_quantization,
    )
    from lowerkit.arm_passes.converter import converter_environment
    from lowerkit.pass_infra.accelerations.patching import lowering_lock

    with lowering_lock(), accelerated_arm_quantization(), accelerated_arm_pipeline():
        if not vgf:
            yield
            return
        with converter_environment():
            yield
