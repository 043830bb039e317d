"""The Arm sameness cases of the zoo CNNs: stock ExecuTorch's public-API lowering and lowerkit's, side by side.

A case is a zoo model (one whose backends include "arm") and an Arm target, calibrated on the
zoo's calibration batches. ``stock_case`` lowers it with ExecuTorch's public API only
(`bench.realworld_flows.arm_public_api`: the Arm quantizer, ``to_edge_transform_and_lower`` with
the Arm partitioner, ``to_executorch``; nothing of lowerkit runs in it but, for VGF targets, the
lookup that puts the ML SDK model converter on ``MODEL_CONVERTER_PATH``). ``lowering_case`` lowers
it with lowerkit's ``lower_to_arm``. Nothing is recorded: calibration runs float kernels whose
last bits depend on the CPU, so the bytes are only comparable within one run, on one machine.
``--twice`` also lowers stock twice (determinism).

    python -m golden.arm [--models a,b] [--targets x,y] [--twice]   # stock vs lowerkit, now
"""

from __future__ import annotations

import argparse
import contextlib
import sys
import time
from typing import Any

from bench.realworld_flows import Lowered, arm_payloads, arm_public_api, arm_stock_quantized

CALIBRATION_BATCHES = 4
CALIBRATION_SEED = 0
#: The zoo CNNs the Arm sameness tests cover (each lists "arm" in its backends).
ARM_MODELS = ("cnn9_layernorm", "resnet8", "mobilenet_v1_025", "ds_cnn")


def stock_case(model_name: str, target: str, **settings: Any) -> Lowered:
    """Stock ExecuTorch's public-API lowering of a zoo model for `target` (`arm_stock`'s `settings`)."""
    from lowerkit import zoo

    model = zoo.get(model_name)
    converter: Any = contextlib.nullcontext()
    if target.startswith("vgf"):
        from lowerkit.arm_passes.converter import converter_environment

        converter = converter_environment()  # where the converter is, as a user's PATH would say
    with converter:
        return arm_public_api(
            model.module(), model.example_inputs(), target,
            model.calibration(CALIBRATION_BATCHES, CALIBRATION_SEED), **settings,
        )  # fmt: skip


def stock_quantized(model_name: str, target: str, **settings: Any) -> Any:
    """The fake-quantized module of stock's pt2e flow for a zoo model (the module stock lowers)."""
    from lowerkit import zoo

    model = zoo.get(model_name)
    calibration = model.calibration(CALIBRATION_BATCHES, CALIBRATION_SEED)
    return arm_stock_quantized(model.module(), model.example_inputs(), target, calibration, **settings)


def lowering_case(model_name: str, target: str, *, verify: bool = False, **settings: Any) -> Any:
    """lowerkit's ``lower_to_arm`` of a zoo model for `target`, on stock's calibration; the ArmLowering."""
    from lowerkit import zoo
    from lowerkit.arm_passes import lower_to_arm

    model = zoo.get(model_name)
    return lower_to_arm(
        model.module(), model.example_inputs(), target,
        calibration=model.calibration(CALIBRATION_BATCHES, CALIBRATION_SEED), verify=verify, **settings,
    )  # fmt: skip


def fingerprint(lowered: Lowered) -> dict[str, Any]:
    """sha256 of the .pte and of each delegate payload of one lowering (a `Lowered`)."""
    return {"pte_sha256": lowered.pte_sha256, "payload_sha256": lowered.payload_digests()}


def as_lowered(lowering: Any) -> Lowered:
    """lowerkit's ``ArmLowering`` as a `Lowered` (its .pte and delegate payloads), to compare with stock's."""
    return Lowered(lowering.pte, arm_payloads(lowering), "arm")


def arm_models() -> list[str]:
    """The Arm zoo CNNs, checked against the zoo."""
    from lowerkit import zoo

    for name in ARM_MODELS:
        if "arm" not in zoo.get(name).backends:
            raise SystemExit(f"zoo model {name} no longer lists the arm backend")
    return list(ARM_MODELS)


def main(argv: list[str] | None = None) -> None:
    from lowerkit.arm_passes import ARM_TARGETS

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--models", default=None, help="comma-separated (default: the Arm zoo CNNs)")
    parser.add_argument("--targets", default=",".join(ARM_TARGETS))
    parser.add_argument("--twice", action="store_true", help="lower stock twice and check the bytes agree")
    args = parser.parse_args(argv)
    models = args.models.split(",") if args.models else arm_models()
    differences = 0
    for name in models:
        for target in args.targets.split(","):
            a16w8 = target == "TOSA-1.0+INT+int16"  # lower_to_arm implies it; a user of the public API asks
            start = time.perf_counter()
            stock = fingerprint(stock_case(name, target, a16w8=a16w8))
            stock_seconds = time.perf_counter() - start
            if args.twice and fingerprint(stock_case(name, target, a16w8=a16w8)) != stock:
                sys.exit(f"stock lowering of {name} {target} is not deterministic")
            start = time.perf_counter()
            fast = fingerprint(as_lowered(lowering_case(name, target)))
            fast_seconds = time.perf_counter() - start
            verdict = "SAME" if fast == stock else "DIFFERENT"
            differences += verdict != "SAME"
            print(
                f"{name:<20} {target:<14} stock {stock_seconds:6.1f}s lowerkit {fast_seconds:6.1f}s "
                f"{verdict} pte {stock['pte_sha256'][:16]}",
                flush=True,
            )
    sys.exit(differences)


if __name__ == "__main__":
    main()
