"""lowerkit.pass_infra: ExportPass infrastructure that skips untouched graphs, fast-copies
untargeted nodes, replays the rest more cheaply, and proves it changed nothing."""

from lowerkit.pass_infra.compare import GraphDifference, first_difference
from lowerkit.pass_infra.discovery import TARGET_ATTRIBUTES, discover_targeted_ops
from lowerkit.pass_infra.errors import PassEquivalenceError, PassInfraError
from lowerkit.pass_infra.fake_cache import EXECUTORCH_NAMESPACES, faketensor_cache
from lowerkit.pass_infra.lowering import accelerated_lowering
from lowerkit.pass_infra.patching import Patch, Replacement, lowering_lock
from lowerkit.pass_infra.pipeline import PassPipeline, PassRecord, PipelineReport, pass_name
from lowerkit.pass_infra.replay import cheaper_replay, vouch_for
from lowerkit.pass_infra.targeted import (
    TargetedPass,
    as_targeted,
    fast_copy_enabled,
    reference_copy,
    should_run,
)
from lowerkit.pass_infra.versions import PROVEN_ON, UnprovenVersionWarning

__all__ = [
    "EXECUTORCH_NAMESPACES",
    "PROVEN_ON",
    "TARGET_ATTRIBUTES",
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
    "as_targeted",
    "cheaper_replay",
    "discover_targeted_ops",
    "faketensor_cache",
    "fast_copy_enabled",
    "first_difference",
    "lowering_lock",
    "pass_name",
    "reference_copy",
    "should_run",
    "vouch_for",
]
