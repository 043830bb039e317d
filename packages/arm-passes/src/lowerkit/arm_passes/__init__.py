"""lowerkit.arm_passes: ExecuTorch's Arm TOSA / Ethos-U / VGF pass pipeline, run fast on lowerkit.pass_infra, same bytes.

The public names are listed once, below, and load on first use
(``lowerkit.pass_infra.helpers.lazy_exports``): importing the package, or a light module of it
such as `converter` (which the lowering cache's key reads), imports neither torch nor ExecuTorch.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from lowerkit.pass_infra.helpers.lazy_exports import lazy_exports

if TYPE_CHECKING:
    from lowerkit.arm_passes.accelerate import (
        accelerated_arm_pipeline,  # scope: stock Arm backends run the fast pipeline, same bytes
        accelerated_arm_quantization,  # scope: pt2e quantization with the Arm quantizer, faster, same model
    )
    from lowerkit.arm_passes.bundle import (
        bundled_program,  # the .bpte bytes: the program with a test case per input and its outputs
        etrecord,  # the ETRecord bytes of a lowering, deterministic
        reference_outputs,  # the lowered program run in torch on some inputs
    )
    from lowerkit.arm_passes.devices import (
        ARM_TARGETS,  # every Arm target name lower_to_arm takes
        ETHOS_U_TARGETS,  # the Ethos-U targets among them
        VGF_TARGETS,  # the VGF targets among them
        compile_spec_for,  # a fresh stock compile spec for a target
    )
    from lowerkit.arm_passes.errors import (
        ArmLoweringError,  # the model or its inputs cannot be lowered as asked
        UnknownArmTargetError,  # a target name lowerkit does not lower to
    )
    from lowerkit.arm_passes.incremental import (
        IncrementalPropagateViewCopyPermuteDownPass,  # the stock pass with in-place metadata refresh
        IncrementalPropagateViewCopyPermuteUpPass,  # the stock pass with in-place metadata refresh
    )
    from lowerkit.arm_passes.lowering import (
        ArmLowering,  # lower_to_arm's result: .pte, TOSA, Vela output, pipeline reports
        lower_to_arm,  # lower a model to an Arm target
    )
    from lowerkit.arm_passes.npu_report import (
        NpuLayer,  # one row of Vela's per-layer performance table
        NpuReport,  # Vela's estimates for one delegated partition
        npu_reports,  # Vela's report for each Ethos-U partition of an ArmLowering
    )
    from lowerkit.arm_passes.numerics.bisect import (
        PassBisection,  # where in the pass pipeline the outputs leave the fake-quant program's
        bisect_passes,  # name the first Arm pass that changes the outputs
    )
    from lowerkit.arm_passes.numerics.debug import (
        debug_arm,  # every quantized layer compared: float, fake-quant, TOSA reference model
    )
    from lowerkit.arm_passes.pipelines import (
        arm_pipeline_passes,  # the passes ArmPassManager runs for a target, in order
        arm_tfa_passes,  # the passes the Arm quantizer's transform_for_annotation runs, in order
    )
    from lowerkit.arm_passes.preflight import (
        BudgetExceededError,  # the program needs more SRAM or flash than the budget
        ChannelWarning,  # a layer whose channel count is just past the granularity
        channel_warnings,  # the layers whose channels round up to much extra work
        check_budgets,  # raise BudgetExceededError when Vela's SRAM or flash use passes a budget
    )
    from lowerkit.arm_passes.reference import (
        ReferenceCheck,  # verify_on_reference_model's outcome: max abs error and SQNR
        run_tosa_reference,  # one TOSA flatbuffer run on the TOSA reference model
        verify_on_reference_model,  # a lowering's TOSA run on the reference model, compared with torch
    )
    from lowerkit.arm_passes.runner import (
        FastArmPassManager,  # ArmPassManager running its pass list through lowerkit.pass_infra
        FastGraphModulePassManager,  # the graph-module pipelines' manager, fast-copying as FastArmPassManager
        passes_inserted_after,  # scope: insert passes after a pass of the pipelines built inside
    )
    from lowerkit.arm_passes.targets import (
        PassTargets,  # a pass class's audited targeted ops, or its whole-graph reason
        audit,  # the pass classes with neither targets nor a whole-graph reason
        targets_of,  # the audited entry of a pass instance
    )
    from lowerkit.arm_passes.vela_config import (
        VelaConfig,  # the system configs and memory modes of one Vela config file
        read_vela_config,  # read a Vela config file (None: Vela's own)
    )
    from lowerkit.arm_passes.versions import (
        PROVEN_ON,  # the torch / ExecuTorch / torchao versions arm-passes was proven on
    )

__all__, __getattr__, __dir__ = lazy_exports(__name__)
