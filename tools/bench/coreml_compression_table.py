"""Size and weight quality of Core ML compression per zoo model: the table in coreml-preprocess's README.

    python tools/bench/coreml_compression_table.py [MODEL ...]

For each Core ML zoo model and recipe (fp16, w8, w4, palettize4, palettize6) it lowers with
``lower_to_coreml``, takes the ``.pte`` size, and decodes the compressed weights *from the delegate
payload* (the ``.mlpackage`` files inside it, decoded with lowerkit's numpy decoders: Core ML
cannot run on Linux). Each decoded weight is compared with the float16 weight the fp16 lowering
(same deployment target) stores for it: the one of the same shape it is closest to, as
``lowerkit lower --verify`` does. Prints a Markdown table.
"""

from __future__ import annotations

import sys
import tempfile
from pathlib import Path

import numpy as np

RECIPES = ("fp16", "w8", "w4", "palettize4", "palettize6")
SPEC = "model.mlpackage/Data/com.apple.CoreML/model.mlmodel"
WEIGHTS = "model.mlpackage/Data/com.apple.CoreML/weights/weight.bin"


def payload_weights(payload: bytes) -> dict[str, np.ndarray]:
    """The compressed weights of a Core ML delegate payload, decoded to dense numpy arrays."""
    import coremltools as ct

    from lowerkit.coreml_compiler_ops import decode_constexpr_weights
    from lowerkit.coreml_preprocess import files_of, unflatten_payload

    files = files_of(unflatten_payload(payload)[1])
    spec = ct.proto.Model_pb2.Model()
    spec.ParseFromString(files[SPEC])
    with tempfile.TemporaryDirectory() as folder:
        weights = Path(folder) / "weight.bin"
        weights.write_bytes(files.get(WEIGHTS, b""))
        return dict(decode_constexpr_weights(spec, weights_dir=folder))


def float_weights(lowering: object) -> list[np.ndarray]:
    """The float consts (>= 10 elements) of a lowering's converted program."""
    program = lowering.mlmodel._mil_program  # type: ignore[attr-defined]
    values = []
    for op in program.functions["main"].operations:
        value = op.outputs[0].val if op.op_type == "const" else None
        if isinstance(value, np.ndarray) and value.dtype.kind == "f" and value.size >= 10:
            values.append(value.astype(np.float32))
    return values


def weight_sqnr(decoded: dict[str, np.ndarray], references: list[np.ndarray]) -> list[float]:
    """Per decoded weight, its SQNR (dB) against the closest float weight of the same shape."""
    from lowerkit.pass_infra import sqnr_db

    result = []
    for value in decoded.values():
        dense = value.astype(np.float32)
        candidates = [sqnr_db(r, dense) for r in references if r.shape == dense.shape]
        if candidates:
            result.append(max(candidates))
    return result


def rows(model_name: str) -> list[str]:
    """The table rows of one zoo model."""
    from lowerkit import zoo
    from lowerkit.coreml_preprocess import compile_options_for, lower_to_coreml

    entry = zoo.get(model_name)
    fp16_size = 0
    lines = []
    for recipe in RECIPES:
        lowering = lower_to_coreml(entry.module(), entry.example_inputs(), recipe)
        target = compile_options_for(recipe).minimum_deployment_target
        reference = lower_to_coreml(
            entry.module(), entry.example_inputs(), "fp16",
            deployment_target=None if target is None else target.name,
        )
        decoded = {}
        for payload in lowering.payloads:
            decoded.update(payload_weights(payload))
        sqnrs = weight_sqnr(decoded, float_weights(reference))
        size = len(lowering.pte)
        fp16_size = fp16_size or size
        quality = f"{min(sqnrs):.1f} / {np.mean(sqnrs):.1f}" if sqnrs else "—"
        lines.append(
            f"| {model_name} | {recipe} | {size:,} | {size / fp16_size:.0%} | {len(decoded)} | {quality} |"
        )
    return lines


def main(models: list[str]) -> None:
    """Print the Markdown table for `models` (default: every Core ML zoo model)."""
    from lowerkit import zoo

    names = models or [m.name for m in zoo.models() if "coreml" in m.backends]
    print("| model | recipe | .pte bytes | of fp16 | compressed weights | weight SQNR min / mean (dB) |")
    print("| --- | --- | ---: | ---: | ---: | ---: |")
    for name in names:
        for line in rows(name):
            print(line, flush=True)


if __name__ == "__main__":
    main(sys.argv[1:])
