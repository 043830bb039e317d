"""Record golden sha256s of stock ExecuTorch's Arm lowering of the zoo CNNs, for lowerkit's sameness tests.

For every zoo model whose backends include "arm" and every Arm target, the model is lowered
with ExecuTorch's own pipeline (``lower_to_arm(..., stock=True)``: the stock Arm quantizer,
partitioner, ``to_edge_transform_and_lower`` with the stock ``ArmPassManager``, and
``to_executorch``), calibrated on the zoo's calibration batches. The golden records the
sha256 of the .pte, of each TOSA flatbuffer, of each vela payload (Ethos-U) and the ops left
on the CPU. ``--twice`` lowers each case twice and fails if the bytes differ (determinism).

    python -m golden.arm [--out FILE] [--models a,b] [--targets x,y] [--twice]
    python -m golden.arm --check [--models a,b] [--targets x,y]   # lowerkit vs the goldens

``lowering_case`` is shared with tests/arm/, so goldens and tests lower the same way.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

DEFAULT_OUT = Path(__file__).resolve().parents[2] / "tests" / "arm" / "goldens" / "arm_stock.json"
CALIBRATION_BATCHES = 4
CALIBRATION_SEED = 0


def lowering_case(model_name: str, target: str, *, stock: bool, verify: bool = False) -> Any:
    """Lower a zoo model for `target` the way the goldens were recorded; returns the ArmLowering."""
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
    """The golden record of one lowering: sha256 of every artifact and the CPU ops."""
    return {
        "pte_sha256": lowering.pte_sha256,
        "tosa_sha256": list(lowering.tosa_sha256),
        "vela_sha256": [hashlib.sha256(b).hexdigest() for b in lowering.vela_binaries],
        "cpu_ops": list(lowering.cpu_ops),
    }


def versions() -> dict[str, str]:
    """Versions of the stack the goldens were recorded with."""
    from importlib.metadata import version

    return {p: version(p) for p in ("torch", "executorch", "tosa-tools", "ethos-u-vela", "torchao")}


#: The zoo CNNs the Arm goldens cover (each lists "arm" in its backends).
GOLDEN_MODELS = ("cnn9_layernorm", "resnet8", "mobilenet_v1_025", "ds_cnn")


def arm_models() -> list[str]:
    """The golden matrix's models, checked against the zoo."""
    from lowerkit import zoo

    for name in GOLDEN_MODELS:
        if "arm" not in zoo.get(name).backends:
            raise SystemExit(f"zoo model {name} no longer lists the arm backend")
    return list(GOLDEN_MODELS)


def main(argv: list[str] | None = None) -> None:
    from lowerkit.arm_passes import ARM_TARGETS

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", default=str(DEFAULT_OUT))
    parser.add_argument(
        "--models", default=None, help="comma-separated (default: zoo CNNs with arm)"
    )
    parser.add_argument("--targets", default=",".join(ARM_TARGETS))
    parser.add_argument(
        "--twice", action="store_true", help="lower twice and check the bytes agree"
    )
    parser.add_argument(
        "--check",
        action="store_true",
        help="lower with lowerkit and compare with the recorded goldens instead",
    )
    args = parser.parse_args(argv)
    if args.check:
        sys.exit(check(Path(args.out), args.models, args.targets))

    out = Path(args.out)
    record: dict[str, Any] = {"versions": versions(), "cases": {}}
    if out.exists():
        record["cases"] = json.loads(out.read_text()).get("cases", {})
    models = args.models.split(",") if args.models else arm_models()
    for name in models:
        for target in args.targets.split(","):
            start = time.perf_counter()
            first = lowering_case(name, target, stock=True)
            entry = fingerprint(first)
            if args.twice:
                again = fingerprint(lowering_case(name, target, stock=True))
                if again != entry:
                    sys.exit(
                        f"stock lowering of {name} {target} is not deterministic: {entry} != {again}"
                    )
            record["cases"][f"{name}/{target}"] = entry
            print(
                f"{name:<20} {target:<14} {time.perf_counter() - start:7.1f}s pte {entry['pte_sha256'][:16]}",
                file=sys.stderr,
                flush=True,
            )
            _write(out, record)


def check(path: Path, models_arg: str | None, targets_arg: str) -> int:
    """Lower every case with lowerkit and compare with the goldens; returns the number of mismatches."""
    cases = json.loads(path.read_text())["cases"]
    models = models_arg.split(",") if models_arg else arm_models()
    failures = 0
    for name in models:
        for target in targets_arg.split(","):
            start = time.perf_counter()
            got = fingerprint(lowering_case(name, target, stock=False))
            want = cases.get(f"{name}/{target}")
            verdict = "SAME" if got == want else "DIFFERENT"
            failures += verdict != "SAME"
            print(
                f"{name:<20} {target:<14} {time.perf_counter() - start:7.1f}s {verdict}", flush=True
            )
    return failures


def _write(path: Path, record: dict[str, Any]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    payload = json.dumps(record, indent=2, sort_keys=True) + "\n"
    with tempfile.NamedTemporaryFile("w", dir=path.parent, delete=False, suffix=".tmp") as handle:
        handle.write(payload)
    os.replace(handle.name, path)


if __name__ == "__main__":
    main()
