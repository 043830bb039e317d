"""Lower to ExecuTorch with the Arm TOSA / Ethos-U delegate, through lowerkit.arm_passes."""

from __future__ import annotations

import json

from lowerkit.cli.model_source import Inputs, ModelSource
from lowerkit.cli.progress import Steps
from lowerkit.cli.result import Lowered
from lowerkit.cli.targets import Target

#: CLI target name -> lowerkit.arm_passes target name.
ARM_TARGET_NAMES = {
    "tosa-int": "TOSA-1.0+INT",
    "tosa-fp": "TOSA-1.0+FP",
    "ethos-u55-128": "ethos-u55-128",
    "ethos-u85-256": "ethos-u85-256",
}


def lower(
    source: ModelSource, target: Target, *, calibration: list[Inputs], steps: Steps, keep_float: tuple[str, ...] = ()
) -> Lowered:
    """Quantize (INT / Ethos-U), run the fast Arm pipeline, and serialize a .pte."""
    from lowerkit.arm_passes import lower_to_arm

    model = source.module if source.module is not None else source.export()
    with steps.step(f"lower to {ARM_TARGET_NAMES[target.name]}"):
        lowering = lower_to_arm(
            model,
            source.example_inputs,
            ARM_TARGET_NAMES[target.name],
            quantize=target.calibrates,
            calibration=calibration or None,
            keep_float=keep_float,
        )
    lowered = Lowered(model=source.name, target=target, pte=lowering.pte, seconds=steps.seconds)
    lowered.tosa = {f"partition{i}.tosa": fb for i, fb in enumerate(lowering.tosa_flatbuffers)}
    lowered.cpu_ops = list(lowering.cpu_ops)
    lowered.passes = [
        {"partition": index, **row}
        for index, report in enumerate(lowering.reports)
        for row in json.loads(report.to_json())["passes"]
    ]
    lowered.reference = lowering
    if lowering.cpu_ops:
        lowered.warnings.append(
            f"partial delegation: these ops stay on the CPU: {', '.join(lowering.cpu_ops)}"
        )
    return lowered
