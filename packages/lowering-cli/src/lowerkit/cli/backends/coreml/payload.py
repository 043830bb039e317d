"""Open a Core ML delegate payload read from a .pte (inspect, --mlpackage): its .mlpackage, its compressed weights."""

from __future__ import annotations

import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

import numpy as np

from lowerkit.cli import atomic

_MLPACKAGE = "model.mlpackage"
T = TypeVar("T")


def _tree(payload: bytes) -> dict[str, Any]:
    from lowerkit.coreml_preprocess.payload import unflatten_payload

    _, tree = unflatten_payload(payload)
    package = tree.get(_MLPACKAGE)
    if not isinstance(package, dict):
        raise ValueError(f"the Core ML payload holds no {_MLPACKAGE} (found: {', '.join(tree)})")
    return package


def _write_tree(tree: dict[str, Any], root: Path) -> None:
    for name, node in tree.items():
        if isinstance(node, dict):
            (root / name).mkdir()
            _write_tree(node, root / name)
        else:
            (root / name).write_bytes(node)


def write_mlpackage(payload: bytes, path: Path) -> None:
    """Write the payload's .mlpackage folder to `path` atomically."""
    tree = _tree(payload)
    atomic.write_directory(path, lambda staging: _write_tree(tree, staging))


def _with_model(payload: bytes, use: Callable[[Any], T]) -> T:
    import coremltools as ct

    with tempfile.TemporaryDirectory() as folder:
        package = Path(folder) / _MLPACKAGE
        package.mkdir()
        _write_tree(_tree(payload), package)
        return use(ct.models.MLModel(str(package), skip_model_load=True))


def weight_summary(payload: bytes) -> dict[str, Any]:
    """Constexpr weight ops by type, and the decoded dense weights' count and element total."""
    from lowerkit.coreml_preprocess.weights import constexpr_op_counts, decoded_weights

    def summarize(model: Any) -> tuple[int, dict[str, int], dict[str, np.ndarray]]:
        return model.get_spec().specificationVersion, constexpr_op_counts(model), decoded_weights(model)

    spec_version, formats, decoded = _with_model(payload, summarize)
    return {
        "constexpr_ops": formats,
        "decoded_weights": len(decoded),
        "decoded_elements": int(sum(array.size for array in decoded.values())),
        "spec_version": spec_version,
    }
