"""Shared helpers for the Core ML quantizer sameness tests."""

from __future__ import annotations

import contextlib
import copy
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

GOLDENS = Path(__file__).parent / "goldens"


def load_golden(name: str) -> dict[str, Any]:
    """A golden file recorded by tools/golden/coreml_quantizer.py."""
    path = GOLDENS / name
    if not path.exists():
        raise AssertionError(
            f"missing golden {path}; record it with `python -m golden.coreml_quantizer`"
        )
    data: dict[str, Any] = json.loads(path.read_text())
    return data


#: torchao QAT pattern graphs by (code, closure, input shapes, kwargs); see below.
_QAT_PATTERN_MEMO: dict[Any, Any] = {}


def _shape_key(value: Any) -> Any:
    import torch

    if isinstance(value, torch.Tensor):
        return ("tensor", tuple(value.shape), str(value.dtype), str(value.device))
    return value


@contextlib.contextmanager
def memoized_torchao_qat_patterns() -> Iterator[None]:
    """Trace each of torchao's conv+bn QAT patterns once per test session.

    torchao's ``prepare_qat_pt2e`` and ``convert_pt2e`` trace ~100 conv+bn patterns
    with a strict ``torch.export`` on every call for a model with batch norm (about
    20 CPU-seconds, in torchao, not in the quantizer under test). A pattern's graph
    depends only on its code, closure and input shapes, so a deep copy of the first
    trace is the same graph; the goldens (recorded without this) prove it.
    """
    from torchao.quantization.pt2e import qat_utils

    original = qat_utils._get_aten_graph_module_for_pattern

    def memoized(pattern: Any, example_inputs: Any, is_cuda: bool = False, **kwargs: Any) -> Any:
        fn = getattr(pattern, "fn", pattern)  # torchao wraps pattern functions in WrapperModule
        if not hasattr(fn, "__code__"):
            return original(pattern, example_inputs, is_cuda, **kwargs)
        cells = tuple(cell.cell_contents for cell in (fn.__closure__ or ()))
        key = (
            type(pattern),
            fn.__code__,
            cells,
            tuple(_shape_key(x) for x in example_inputs),
            is_cuda,
            tuple(sorted((k, _shape_key(v)) for k, v in kwargs.items())),
        )
        try:
            hash(key)
        except TypeError:
            return original(pattern, example_inputs, is_cuda, **kwargs)
        if key not in _QAT_PATTERN_MEMO:
            _QAT_PATTERN_MEMO[key] = original(pattern, example_inputs, is_cuda, **kwargs)
        return copy.deepcopy(_QAT_PATTERN_MEMO[key])

    qat_utils._get_aten_graph_module_for_pattern = memoized
    try:
        yield
    finally:
        qat_utils._get_aten_graph_module_for_pattern = original
