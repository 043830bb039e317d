"""arm-passes' rows of the table of accelerations (`lowerkit.pass_infra.accelerations.table`)."""

from __future__ import annotations

from lowerkit.arm_passes._upstream_arm_manager import ARM_MANAGER
from lowerkit.arm_passes._upstream_graph_module_passes import GRAPH_MODULE_PASSES
from lowerkit.arm_passes._upstream_stack_traces import STACK_TRACE_USERS, STACK_TRACES
from lowerkit.arm_passes._upstream_tosa_preprocess import TOSA_PREPROCESS
from lowerkit.arm_passes.upstream_fixes import SCALAR_OF_A_WEIGHT
from lowerkit.pass_infra.accelerations.table import Acceleration

__all__ = ["ACCELERATIONS"]

_PIPELINE = "accelerated_arm_pipeline()"
_QUANTIZATION = "accelerated_arm_quantization()"

#: arm-passes' patches (every Arm scope also holds pass-infra's lowering or quantization scope).
ACCELERATIONS: tuple[Acceleration, ...] = (
    Acceleration(
        GRAPH_MODULE_PASSES,
        (_QUANTIZATION,),
        "the Arm quantizer's `transform_for_annotation` pipeline: `FastGraphModulePassManager`",
    ),
    Acceleration(
        SCALAR_OF_A_WEIGHT,
        (_QUANTIZATION, _PIPELINE),
        "`ReplaceScalarWithTensorArgPass` (a fix: stock fails on a weight scaled by a constant)",
    ),
    Acceleration(ARM_MANAGER, (_PIPELINE,), "the Arm backend's pass pipeline: `FastArmPassManager`"),
    Acceleration(
        STACK_TRACES,
        (_QUANTIZATION, _PIPELINE),
        "the Arm passes' `stack_trace` lines: two frames formatted, not the whole stack",
        guarded_by={
            f"{module.__name__}:traceback": f"{module.__name__}:{user}" for module, user in STACK_TRACE_USERS.items()
        },
    ),
    Acceleration(
        TOSA_PREPROCESS,
        ("lower_to_arm (stock too)", "debug_arm"),
        "TOSA serialization: records each flatbuffer and program (no speed-up)",
    ),
)
