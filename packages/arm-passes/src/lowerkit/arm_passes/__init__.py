"""lowerkit.arm_passes: ExecuTorch's Arm TOSA / Ethos-U pass pipeline, run fast on lowerkit.pass_infra, same bytes."""

from lowerkit.arm_passes.accelerate import accelerated_arm_pipeline
from lowerkit.arm_passes.devices import ARM_TARGETS, ETHOS_U_TARGETS, compile_spec_for
from lowerkit.arm_passes.errors import ArmLoweringError, UnknownArmTargetError
from lowerkit.arm_passes.incremental import (
    IncrementalPropagateViewCopyPermuteDownPass,
    IncrementalPropagateViewCopyPermuteUpPass,
)
from lowerkit.arm_passes.lowering import ArmLowering, lower_to_arm
from lowerkit.arm_passes.pipelines import arm_pipeline_passes
from lowerkit.arm_passes.reference import (
    ReferenceCheck,
    run_tosa_reference,
    verify_on_reference_model,
)
from lowerkit.arm_passes.runner import FastArmPassManager
from lowerkit.arm_passes.targets import PassTargets, audit, targets_of
from lowerkit.arm_passes.versions import PROVEN_ON

__all__ = [
    "ARM_TARGETS",
    "ETHOS_U_TARGETS",
    "PROVEN_ON",
    "ArmLowering",
    "ArmLoweringError",
    "FastArmPassManager",
    "IncrementalPropagateViewCopyPermuteDownPass",
    "IncrementalPropagateViewCopyPermuteUpPass",
    "PassTargets",
    "ReferenceCheck",
    "UnknownArmTargetError",
    "accelerated_arm_pipeline",
    "arm_pipeline_passes",
    "audit",
    "compile_spec_for",
    "lower_to_arm",
    "run_tosa_reference",
    "targets_of",
    "verify_on_reference_model",
]
