"""How `inspect` shows a Core ML delegate: its enumerated input shapes and, with --weights, its weight formats.

Standard library only, but the weight formats: decoding them imports coremltools.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from lowerkit.cli.backend import PayloadDecoder


def enumerated_shapes(compile_specs: Mapping[str, str]) -> dict[str, list[list[int]]]:
    """A Core ML delegate's enumerated input shapes, from ExecuTorch's ``enumerated_shapes`` spec."""
    text = compile_specs.get("enumerated_shapes")
    if not text:
        return {}
    shapes: dict[str, list[list[int]]] = {}
    try:
        for _symbolic, (enumerations, names) in json.loads(text):
            for name in names:
                shapes[str(name)] = [[int(d) for d in shape] for shape in enumerations]
    except (ValueError, TypeError):
        return {"?": []}
    return shapes


def _decode(payload: bytes, compile_specs: Mapping[str, str], deep: bool) -> dict[str, Any] | None:
    if not deep:
        return None
    from lowerkit.cli.backends.coreml.payload import weight_summary

    return weight_summary(payload)


def _lines(compile_specs: Mapping[str, str], weights: dict[str, Any] | None) -> list[str]:
    lines = [
        f"      input {name}: enumerated shapes {' | '.join('x'.join(map(str, s)) for s in listed)}"
        for name, listed in enumerated_shapes(compile_specs).items()
    ]
    if weights is not None:
        formats = ", ".join(f"{op} x{n}" for op, n in weights["constexpr_ops"].items())
        lines.append(
            f"      Core ML spec v{weights['spec_version']}; compressed weights: "
            f"{formats or 'none (dense)'}; decoded {weights['decoded_weights']} tensors"
        )
    return lines


#: A Core ML delegate: constexpr weight formats and decoded weights (`inspect --weights`).
WEIGHTS = PayloadDecoder("CoreMLBackend", "weights", _decode, _lines)
