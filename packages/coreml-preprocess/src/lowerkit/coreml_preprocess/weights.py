"""What a converted Core ML model holds: its compressed (constexpr) weight ops, decoded to numpy."""

from __future__ import annotations

from collections import Counter
from typing import Any

import numpy as np

__all__ = ["constexpr_op_counts", "decoded_weights"]


def constexpr_op_counts(mlmodel: Any) -> dict[str, int]:
    """How many ops of each ``constexpr_*`` type (compressed weights) the model's program has."""
    counts: Counter[str] = Counter()
    for function in mlmodel.get_spec().mlProgram.functions.values():
        for block in function.block_specializations.values():
            for operation in block.operations:
                if operation.type.startswith("constexpr_"):
                    counts[operation.type] += 1
    return dict(sorted(counts.items()))


def decoded_weights(mlmodel: Any) -> dict[str, np.ndarray]:
    """Dense numpy weights of every constexpr (compressed) weight op of the model."""
    from lowerkit.coreml_compiler_ops.decode import decode_constexpr_weights

    return dict(decode_constexpr_weights(mlmodel))
