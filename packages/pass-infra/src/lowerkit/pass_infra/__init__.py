"""lowerkit.pass_infra: ExportPass infrastructure that skips untouched graphs, fast-copies
untargeted nodes, replays the rest more cheaply, and proves it changed nothing; also the few
helpers every lowerkit package shares (did_you_mean, write_bytes_atomically, sqnr_db).

Names load on first use: importing the package (or `suggest` / `files`) does not import torch
or ExecuTorch, so the `lowerkit` command can use the shared helpers and still start fast.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from lowerkit.pass_infra.collector import settled_heap
    from lowerkit.pass_infra.compare import GraphDifference, first_difference
    from lowerkit.pass_infra.discovery import TARGET_ATTRIBUTES, discover_targeted_ops
    from lowerkit.pass_infra.errors import PassEquivalenceError, PassInfraError
    from lowerkit.pass_infra.fake_cache import EXECUTORCH_NAMESPACES, faketensor_cache
    from lowerkit.pass_infra.files import write_bytes_atomically
    from lowerkit.pass_infra.graph_ops import cpu_ops, delegate_payloads, op_name
    from lowerkit.pass_infra.inputs import example_input_tuple, require_model
    from lowerkit.pass_infra.lowering import accelerated_lowering
    from lowerkit.pass_infra.numerics import sqnr_db
    from lowerkit.pass_infra.patching import Patch, Replacement, lowering_lock
    from lowerkit.pass_infra.pipeline import PassPipeline, PassRecord, PipelineReport, pass_name
    from lowerkit.pass_infra.quantization import accelerated_quantization
    from lowerkit.pass_infra.replay import cheaper_replay, vouch_for
    from lowerkit.pass_infra.retrace_skip import DecompositionFallback, decomposition_fallbacks
    from lowerkit.pass_infra.suggest import did_you_mean
    from lowerkit.pass_infra.targeted import (
        TargetedPass,
        as_targeted,
        fast_copy_enabled,
        reference_copy,
        should_run,
    )
    from lowerkit.pass_infra.versions import PROVEN_ON, UnprovenVersionWarning

#: Public name -> the module that defines it.
_EXPORTS: dict[str, str] = {
    "EXECUTORCH_NAMESPACES": "lowerkit.pass_infra.fake_cache",
    "PROVEN_ON": "lowerkit.pass_infra.versions",
    "TARGET_ATTRIBUTES": "lowerkit.pass_infra.discovery",
    "DecompositionFallback": "lowerkit.pass_infra.retrace_skip",
    "GraphDifference": "lowerkit.pass_infra.compare",
    "PassEquivalenceError": "lowerkit.pass_infra.errors",
    "PassInfraError": "lowerkit.pass_infra.errors",
    "PassPipeline": "lowerkit.pass_infra.pipeline",
    "PassRecord": "lowerkit.pass_infra.pipeline",
    "Patch": "lowerkit.pass_infra.patching",
    "PipelineReport": "lowerkit.pass_infra.pipeline",
    "Replacement": "lowerkit.pass_infra.patching",
    "TargetedPass": "lowerkit.pass_infra.targeted",
    "UnprovenVersionWarning": "lowerkit.pass_infra.versions",
    "accelerated_lowering": "lowerkit.pass_infra.lowering",
    "accelerated_quantization": "lowerkit.pass_infra.quantization",
    "cpu_ops": "lowerkit.pass_infra.graph_ops",
    "decomposition_fallbacks": "lowerkit.pass_infra.retrace_skip",
    "delegate_payloads": "lowerkit.pass_infra.graph_ops",
    "example_input_tuple": "lowerkit.pass_infra.inputs",
    "require_model": "lowerkit.pass_infra.inputs",
    "settled_heap": "lowerkit.pass_infra.collector",
    "op_name": "lowerkit.pass_infra.graph_ops",
    "as_targeted": "lowerkit.pass_infra.targeted",
    "cheaper_replay": "lowerkit.pass_infra.replay",
    "did_you_mean": "lowerkit.pass_infra.suggest",
    "discover_targeted_ops": "lowerkit.pass_infra.discovery",
    "faketensor_cache": "lowerkit.pass_infra.fake_cache",
    "fast_copy_enabled": "lowerkit.pass_infra.targeted",
    "first_difference": "lowerkit.pass_infra.compare",
    "lowering_lock": "lowerkit.pass_infra.patching",
    "pass_name": "lowerkit.pass_infra.pipeline",
    "reference_copy": "lowerkit.pass_infra.targeted",
    "should_run": "lowerkit.pass_infra.targeted",
    "sqnr_db": "lowerkit.pass_infra.numerics",
    "vouch_for": "lowerkit.pass_infra.replay",
    "write_bytes_atomically": "lowerkit.pass_infra.files",
}

__all__ = [
    "EXECUTORCH_NAMESPACES",
    "PROVEN_ON",
    "TARGET_ATTRIBUTES",
    "DecompositionFallback",
    "GraphDifference",
    "PassEquivalenceError",
    "PassInfraError",
    "PassPipeline",
    "PassRecord",
    "Patch",
    "PipelineReport",
    "Replacement",
    "TargetedPass",
    "UnprovenVersionWarning",
    "accelerated_lowering",
    "accelerated_quantization",
    "as_targeted",
    "cheaper_replay",
    "cpu_ops",
    "decomposition_fallbacks",
    "delegate_payloads",
    "did_you_mean",
    "discover_targeted_ops",
    "example_input_tuple",
    "faketensor_cache",
    "fast_copy_enabled",
    "first_difference",
    "lowering_lock",
    "op_name",
    "pass_name",
    "reference_copy",
    "require_model",
    "settled_heap",
    "should_run",
    "sqnr_db",
    "vouch_for",
    "write_bytes_atomically",
]


def __getattr__(name: str) -> Any:
    """Import the module defining `name` on first use (PEP 562)."""
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(__all__)
