"""The Arm backend: TOSA, Ethos-U and VGF targets, lowered through lowerkit.arm_passes."""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

from lowerkit.cli.backend import Backend, DebugRequest, Given, TargetOption
from lowerkit.cli.errors import LoweringError, UsageError
from lowerkit.cli.options import LowerOptions, Target
from lowerkit.cli.progress import Steps
from lowerkit.cli.result import Lowered

if TYPE_CHECKING:
    from lowerkit.cli.sources.model import Inputs, ModelSource

#: Every Ethos-U configuration ExecuTorch 1.5.1 accepts: (NPU, MACs per cycle). Listed here, not
#: imported from lowerkit.arm_passes, so `lowerkit targets` starts without torch (a test checks
#: the two lists agree).
ETHOS_U_CONFIGS: tuple[tuple[int, int], ...] = (
    *((55, macs) for macs in (32, 64, 128, 256)),
    *((65, macs) for macs in (256, 512)),
    *((85, macs) for macs in (128, 256, 512, 1024, 2048)),
)


@dataclass(frozen=True)
class ArmTarget:
    """One Arm target: the CLI's name, lowerkit.arm_passes' name, and the kind of output."""

    name: str
    arm_name: str
    kind: Literal["tosa", "ethos-u", "vgf"]
    summary: str
    calibrates: bool = False
    #: Quantizes activations to int16 by itself (what --a16w8 asks of Ethos-U).
    a16w8: bool = False


#: Adding an Arm target is one row here (and its pipeline in lowerkit.arm_passes).
TARGET_TABLE: tuple[ArmTarget, ...] = (
    ArmTarget("tosa-int", "TOSA-1.0+INT", "tosa", "TOSA-1.0+INT flatbuffer (int8 quantized)", True),
    ArmTarget("tosa-fp", "TOSA-1.0+FP", "tosa", "TOSA-1.0+FP flatbuffer (float)"),
    ArmTarget(
        "tosa-int16", "TOSA-1.0+INT+int16", "tosa",
        "TOSA-1.0+INT+int16 flatbuffer (a16w8: int16 activations, int8 weights)", True, a16w8=True,
    ),
    *(
        ArmTarget(
            f"ethos-u{npu}-{macs}", f"ethos-u{npu}-{macs}", "ethos-u",
            f"Arm Ethos-U{npu}, {macs} MACs (int8 or --a16w8, vela-compiled)", True,
        )
        for npu, macs in ETHOS_U_CONFIGS
    ),
    # ExecuTorch's aot_arm_compiler has one `vgf` target: TOSA-1.0+INT with --quantize, +FP without.
    ArmTarget(
        "vgf-int", "vgf-int", "vgf",
        "VGF (TOSA-1.0+INT, int8 quantized, converted by Arm's ML SDK model converter)", True,
    ),
    ArmTarget("vgf-fp", "vgf-fp", "vgf", "VGF (TOSA-1.0+FP, float, converted by Arm's ML SDK model converter)"),
)
_FAMILY = "arm"
_BY_NAME = {row.name: row for row in TARGET_TABLE}

#: CLI target name -> lowerkit.arm_passes target name.
ARM_TARGET_NAMES = {row.name: row.arm_name for row in TARGET_TABLE}


def _kind(target: Target) -> str | None:
    row = _BY_NAME.get(target.name)
    return row.kind if row is not None else None


def _is_arm(target: Target) -> bool:
    return target.name in _BY_NAME


def _is_ethos_u(target: Target) -> bool:
    return _kind(target) == "ethos-u"


def _ignored_by_vgf(option: str) -> Any:
    """ExecuTorch's aot_arm_compiler takes this Vela setting for `vgf` and ignores it: a warning there."""

    def ignored(target: Target) -> str | None:
        if _kind(target) != "vgf":
            return None
        return f"{option} is a Vela (Ethos-U) setting; '{target.name}' ignores it, as ExecuTorch's VGF lowering does"

    return ignored


def _a16w8_hint(target: Target) -> str:
    row = _BY_NAME.get(target.name)
    if row is not None and row.a16w8:
        return f"; {row.name} is a16w8 already"
    if row is not None and row.kind == "vgf":
        return "; ExecuTorch's VGF lowering uses TOSA-1.0+INT, which has no int16 (use -t tosa-int16)"
    return f"; for TOSA use -t {next(r.name for r in TARGET_TABLE if r.a16w8)}"


_ETHOS_U = "Ethos-U targets (ethos-u55-128, ...)"


def _vela_option(flag: str) -> TargetOption:
    return TargetOption(flag, _ETHOS_U, _is_ethos_u, ignored=_ignored_by_vgf(flag))


class ArmBackend(Backend):
    """TOSA flatbuffers, Ethos-U (Vela) and VGF programs through lowerkit.arm_passes."""

    family = _FAMILY
    title = "Arm"
    preload = ("lowerkit.arm_passes",)
    verification_figures = (("sqnr_db", "SQNR"),)
    targets = tuple(Target(row.name, _FAMILY, row.summary, row.calibrates) for row in TARGET_TABLE)
    options = (
        _vela_option("--system-config"),
        _vela_option("--memory-mode"),
        _vela_option("--vela-config"),
        TargetOption("--sram-budget", _ETHOS_U, _is_ethos_u),
        TargetOption("--flash-budget", _ETHOS_U, _is_ethos_u),
        TargetOption("--a16w8", "Ethos-U targets", _is_ethos_u, hint=_a16w8_hint),
        TargetOption("--bundle", "Arm targets", _is_arm),
        TargetOption("--etrecord", "Arm targets", _is_arm),
        TargetOption("--tosa-dir", "Arm targets", _is_arm),
        TargetOption(
            "--bisect", "Arm targets", _is_arm,
            refusal_text="{flag} bisects the Arm pass pipeline; '{target}' is not an Arm target",
        ),
    )

    def settings(self, target: Target, given: Given) -> dict[str, Any]:
        """Vela, a16w8, bundle / ETRecord and budget fields; the Vela file must exist and the sizes parse."""
        from lowerkit.cli.sizes import parse_size

        bundle: Path | None = given.get("--bundle")
        if bundle is not None and bundle.suffix != ".bpte":
            raise UsageError(f"--bundle writes a bundled program; name it '{bundle.with_suffix('.bpte')}'")
        vela_config: Path | None = given.get("--vela-config")
        if vela_config is not None and not vela_config.is_file():
            raise UsageError(f"Vela config file '{vela_config}' does not exist; give the path of a vela.ini")
        budgets = {
            name: parse_size(given[flag], flag) if given.get(flag) is not None else None
            for name, flag in (("sram_budget", "--sram-budget"), ("flash_budget", "--flash-budget"))
        }
        return {
            "system_config": given.get("--system-config"),
            "memory_mode": given.get("--memory-mode"),
            "vela_config": vela_config,
            "a16w8": bool(given.get("--a16w8")),
            "bundle_path": bundle,
            "etrecord_path": given.get("--etrecord"),
            **budgets,
        }

    def lower(self, source: ModelSource, options: LowerOptions, *, calibration: list[Inputs], steps: Steps) -> Lowered:
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
                scan=request.scan, model_name=source.name, bisect=True if request.bisect else None,
                target_sqnr_db=request.target_sqnr, search=request.search,
            )
        except NoQuantizedLayerError as error:
            raise UsageError(str(error)) from None

    def pattern(self, target: Target) -> str | None:
        """"ethos-u*" for the Ethos-U targets."""
        return "ethos-u*" if _is_ethos_u(target) else None

    def runs_model_converter(self, target: Target) -> bool:
        """The VGF targets."""
        return _kind(target) == "vgf"

    def write_outputs(self, lowered: Lowered, options: LowerOptions, given: Given) -> list[str]:
        """The bundled program, the ETRecord and the TOSA flatbuffers (--tosa-dir), where asked."""
        from lowerkit.pass_infra.helpers.files import write_bytes_atomically

        lines = []
        for kind, path, what in (
            ("bundle", options.bundle_path, "bundled program"), ("etrecord", options.etrecord_path, "ETRecord"),
        ):
            if path is not None:
                write_bytes_atomically(path, lowered.extras[kind])
                lines.append(f"wrote {path} ({path.stat().st_size:,} bytes, {what})")
        tosa_dir: Path | None = given.get("--tosa-dir")
        if tosa_dir is not None:
            tosa_dir.mkdir(parents=True, exist_ok=True)
            for name, flatbuffer in lowered.tosa.items():
                write_bytes_atomically(tosa_dir / name, flatbuffer)
        return lines

    def result_lines(self, lowered: Lowered) -> list[str]:
        """Ethos-U: Vela's NPU report, without the per-layer table."""
        if not lowered.npu:
            return []
        from lowerkit.cli.backends.arm.npu import render

        return list(render(lowered.npu, layers=False))


def _lower_to_arm(source: ModelSource, options: LowerOptions, calibration: list[Inputs]) -> Any:
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


def _npu(lowered: Lowered, lowering: Any, options: LowerOptions) -> None:
    """Read Vela's report, add the pre-flight warnings, and enforce the budgets (nothing written yet)."""
    from lowerkit.arm_passes.npu_report import npu_reports
    from lowerkit.arm_passes.preflight import BudgetExceededError, channel_warnings, check_budgets
    from lowerkit.arm_passes.vela_config import read_vela_config
    from lowerkit.cli.backends.arm.npu import npu_section

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


#: The Arm backend (registered in `targets`).
ARM = ArmBackend()
