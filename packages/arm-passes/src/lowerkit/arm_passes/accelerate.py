"""accelerated_arm_pipeline / accelerated_arm_quantization: ExecuTorch's own Arm lowering and Arm
quantizer, run on lowerkit's fast pipelines."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator

from lowerkit.arm_passes._upstream_arm_manager import patched_arm_pass_manager
from lowerkit.arm_passes._upstream_graph_module_passes import patched_graph_module_pass_manager
from lowerkit.arm_passes._upstream_stack_traces import STACK_TRACES
from lowerkit.arm_passes.runner import (
    FastArmPassManager,
    FastGraphModulePassManager,
    collect_reports,
)
from lowerkit.arm_passes.upstream_fixes import SCALAR_OF_A_WEIGHT
from lowerkit.arm_passes.versions import PROVEN_ON
from lowerkit.pass_infra.accelerations.lowering import accelerated_lowering
from lowerkit.pass_infra.accelerations.quantization import accelerated_quantization
from lowerkit.pass_infra.accelerations.signature_lookups import cached_signature_lookups
from lowerkit.pass_infra.accelerations.versions import proven_scope
from lowerkit.pass_infra.framework.pipeline import PipelineReport

__all__ = ["accelerated_arm_pipeline", "accelerated_arm_quantization"]


@contextlib.contextmanager
def accelerated_arm_pipeline(*, verify: bool = False, track_changes: bool = False) -> Iterator[list[PipelineReport]]:
    """Within the block, the Arm TOSA/Ethos-U backends run the fast pipeline; yields the list of reports.

    The backend pass pipeline runs lowerkit's way (same passes, same order, same output), and
    ExecuTorch's generic stages (edge passes, ``run_decompositions``, ``to_executorch``) run
    inside ``lowerkit.pass_infra.accelerated_lowering()``; ExecuTorch is restored on exit,
    exceptions included. With `verify`, every pass is also re-run the
    stock way and a difference raises ``lowerkit.pass_infra.PassEquivalenceError``. Each report
    gives every pass's time and node counts; with `track_changes` also whether it changed the
    graph (``changed``, else None), which snapshots the graph after every pass that ran.
    The signature's input-name lookups (``inputs_to_buffers`` & co., which the Arm passes
    and the TOSA serializer read per node) are served from a cache any change of the
    input specs invalidates (``lowerkit.pass_infra.accelerations.signature_lookups.cached_signature_lookups``).

    Only lowerings run by the thread inside the block are accelerated (other threads get stock
    ExecuTorch); the block holds the process-wide lowering lock, so lowerings in several
    threads run one at a time. On library versions other than ``PROVEN_ON`` the stock
    pipeline runs (no reports), with an ``UnprovenVersionWarning``. Stock's failure on a weight
    scaled by a constant (GPT-2) is fixed (`upstream_fixes`). The Arm passes' provenance lines
    (``stack_trace``) are formatted from the frames they name only (`_upstream_stack_traces`).
    """
    reports: list[PipelineReport] = []
    manager = VerifyingFastArmPassManager if verify else FastArmPassManager
    with proven_scope(
        "lowerkit-arm-passes",
        PROVEN_ON,
        "accelerated_arm_pipeline",
        accelerated_lowering(),
        SCALAR_OF_A_WEIGHT.scope(),
        STACK_TRACES.scope(),
        cached_signature_lookups(),
        patched_arm_pass_manager(manager),
        collect_reports(reports, track_changes=track_changes),
    ):
        yield reports


class VerifyingFastArmPassManager(FastArmPassManager):
    """FastArmPassManager in verify mode (every pass also re-run the stock way and compared)."""

    verify = True


@contextlib.contextmanager
def accelerated_arm_quantization() -> Iterator[None]:
    """Within the block, pt2e quantization with ExecuTorch's Arm quantizers (``TOSAQuantizer``,
    ``EthosUQuantizer``, ``VgfQuantizer``) runs faster: the same prepared and converted models.

    ``lowerkit.pass_infra.accelerated_quantization()`` (for any quantizer), and the Arm
    quantizer's ``transform_for_annotation`` pipeline run as `accelerated_arm_pipeline` runs
    the backend's: the same passes in the same order, each targeted pass fast-copying the
    nodes it does not target (`FastGraphModulePassManager`). Scopes nest; only the calling
    thread is affected; stock (with an ``UnprovenVersionWarning``) on versions other than
    ``PROVEN_ON``. Stock's failure on a weight scaled by a constant (GPT-2) is fixed
    (`upstream_fixes`); the Arm passes' provenance lines come from the frames they name only
    (`_upstream_stack_traces`).
    """
    with proven_scope(
        "lowerkit-arm-passes",
        PROVEN_ON,
        "accelerated_arm_quantization",
        accelerated_quantization(),
        SCALAR_OF_A_WEIGHT.scope(),
        STACK_TRACES.scope(),
        patched_graph_module_pass_manager(FastGraphModulePassManager),
    ):
        yield
