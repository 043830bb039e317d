"""Stock ExecuTorch's Arm lowering of the zoo CNNs as the reference for lowerkit's sameness tests.

A case is a zoo model (one whose backends include "arm") and an Arm target. ``lowering_case``
lowers it the one way the tests and this tool share: ``lower_to_arm`` on the zoo module,
calibrated on the zoo's calibration batches, with ``stock=True`` for ExecuTorch's own pipeline
(the stock Arm quantizer, partitioner, ``to_edge_transform_and_lower`` with the stock
``ArmPassManager``, ``to_executorch``) or lowerkit's accelerated one. Nothing is recorded:
calibration runs float kernels whose last bits depend on the CPU, so the bytes are only
comparable within one run, on one machine. ``--twice`` also lowers stock twice (determinism).

    python -m golden.arm [--models a,b] [--targets x,y] [--twice]   # stock vs lowerkit, now
"""

from __future__ import annotations

import argparse
import hashlib
import sys
import time
from typing import Any

CALIBRATION_BATCHES = 4
CALIBRATION_SEED = 0
#: The zoo CNNs the Arm sameness tests cover (each lists "arm" in its backends).
ARM_MODELS = ("cnn9_layernorm", "resnet8", "mobilenet_v1_025", "ds_cnn")


def lowering_case(model_name: str, target: str, *, stock: bool, verify: bool = False) -> Any:
    """Lower a zoo model for `target` the way the sameness tests do; returns the ArmLowering."""
    from lowerkit import zoo
    from lowerkit.arm_passes import lower_to_arm

    model = zoo.get(model_name)
    return lower_to_arm(
        model.module(),
        model.example_inputs(),
        target,
        calibration=model.calibration(CALIBRATION_BATCHES, CALIBRATION_SEED),
        stock=stock,
        verify=verify,
    )


def fingerprint(lowering: Any) -> dict[str, Any]:
    """sha256 of every artifact of one lowering (.pte, TOSA, vela, VGF) and the CPU ops."""
    return {
        "pte_sha256": lowering.pte_sha256,
        "tosa_sha256": list(lowering.tosa_sha256),
        "vela_sha256": [hashlib.sha256(b).hexdigest() for b in lowering.vela_binaries],
        "vgf_sha256": [hashlib.sha256(b).hexdigest() for b in lowering.vgf_binaries],
        "cpu_ops": list(lowering.cpu_ops),
    }


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
            start = time.perf_counter()
            stock = fingerprint(lowering_case(name, target, stock=True))
            stock_seconds = time.perf_counter() - start
            if args.twice and fingerprint(lowering_case(name, target, stock=True)) != stock:
                sys.exit(f"stock lowering of {name} {target} is not deterministic")
            start = time.perf_counter()
            fast = fingerprint(lowering_case(name, target, stock=False))
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
