"""lowerkit.arm_passes: ExecuTorch's Arm TOSA / Ethos-U / VGF pass pipeline, run fast on lowerkit.pass_infra, same bytes."""

from lowerkit.arm_passes.accelerate import accelerated_arm_pipeline
from lowerkit.arm_passes.bundle import bundled_program, etrecord, reference_outputs
from lowerkit.arm_passes.devices import ARM_TARGETS, ETHOS_U_TARGETS, VGF_TARGETS, compile_spec_for
from lowerkit.arm_passes.errors import ArmLoweringError, UnknownArmTargetError
from lowerkit.arm_passes.incremental import (
    IncrementalPropagateViewCopyPermuteDownPass,
    IncrementalPropagateViewCopyPermuteUpPass,
)
from lowerkit.arm_passes.lowering import ArmLowering, lower_to_arm
from lowerkit.arm_passes.npu_report import NpuLayer, NpuReport, npu_reports
from lowerkit.arm_passes.numerics.bisect import PassBisection, bisect_passes
from lowerkit.arm_passes.numerics.debug import debug_arm
from lowerkit.arm_passes.pipelines import arm_pipeline_passes
from lowerkit.arm_passes.preflight import (
    BudgetExceededError,
    ChannelWarning,
    channel_warnings,
    check_budgets,
)
from lowerkit.arm_passes.reference import (
    ReferenceCheck,
    run_tosa_reference,
    verify_on_reference_model,
)
from lowerkit.arm_passes.runner import FastArmPassManager, passes_inserted_after
from lowerkit.arm_passes.targets import PassTargets, audit, targets_of
from lowerkit.arm_passes.vela_config import VelaConfig, read_vela_config
from lowerkit.arm_passes.versions import PROVEN_ON

__all__ = [
    "ARM_TARGETS",
    "ETHOS_U_TARGETS",
    "PROVEN_ON",
    "VGF_TARGETS",
    "ArmLowering",
    "ArmLoweringError",
    "BudgetExceededError",
    "ChannelWarning",
    "FastArmPassManager",
    "IncrementalPropagateViewCopyPermuteDownPass",
    "IncrementalPropagateViewCopyPermuteUpPass",
    "NpuLayer",
    "NpuReport",
    "PassBisection",
    "PassTargets",
    "ReferenceCheck",
    "UnknownArmTargetError",
    "VelaConfig",
    "accelerated_arm_pipeline",
    "arm_pipeline_passes",
    "audit",
    "bisect_passes",
    "bundled_program",
    "channel_warnings",
    "check_budgets",
    "compile_spec_for",
    "debug_arm",
    "etrecord",
    "lower_to_arm",
    "npu_reports",
    "passes_inserted_after",
    "read_vela_config",
    "reference_outputs",
    "run_tosa_reference",
    "targets_of",
    "verify_on_reference_model",
]
