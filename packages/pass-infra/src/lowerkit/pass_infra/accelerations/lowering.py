"""accelerated_lowering: ExecuTorch's generic lowering stages, for any backend, faster."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

from lowerkit.pass_infra.accelerations.cheaper_replay import cheaper_replay
from lowerkit.pass_infra.accelerations.cia_scan import CIA_SCAN
from lowerkit.pass_infra.accelerations.compiled_code import COMPILED_CODE
from lowerkit.pass_infra.accelerations.dead_code import DEAD_CODE
from lowerkit.pass_infra.accelerations.deferred_export import DEFERRED_EXPORT
from lowerkit.pass_infra.accelerations.deferred_lowering import DEFERRED_LOWERING
from lowerkit.pass_infra.accelerations.export_guards import EXPORT_GUARDS
from lowerkit.pass_infra.accelerations.fake_cache import faketensor_cache
from lowerkit.pass_infra.accelerations.lifted_constants import LIFTED_CONSTANTS
from lowerkit.pass_infra.accelerations.partition_reachability import PARTITION_REACHABILITY
from lowerkit.pass_infra.accelerations.pattern_skip import PATTERN_SKIP
from lowerkit.pass_infra.accelerations.retrace_skip import RETRACE_SKIP
from lowerkit.pass_infra.accelerations.settled_heap import SETTLED_HEAP
from lowerkit.pass_infra.accelerations.shared_provenance import SHARED_PROVENANCE
from lowerkit.pass_infra.accelerations.verified_graphs import VERIFIED_GRAPHS
from lowerkit.pass_infra.accelerations.versions import PROVEN_ON, proven_scope

__all__ = ["accelerated_lowering"]


@contextmanager
def accelerated_lowering() -> Iterator[None]:
    """Within the block, ``to_edge`` / ``to_edge_transform_and_lower`` / ``to_executorch`` run faster.

    Same programs and ``.pte`` bytes as stock ExecuTorch, for any backend:

    - every ``ExportPass`` (ExecuTorch's edge and emit-time passes, backends' own passes such
      as XNNPACK's preprocess passes) replays under ``cheaper_replay()``;
    - FakeTensor's dispatch cache covers ExecuTorch's op namespaces (``faketensor_cache()``);
    - backend pattern passes (XNNPACK's SDPA and bilinear-upsample fusions) skip building
      their pattern graphs when an op every pattern holds is absent from the graph;
    - ``run_decompositions`` scans the CompositeImplicitAutograd ops once per table, not once
      per op namespace, and does without its whole-program re-trace where it can
      (``retrace_skip``): only the nodes that may change are re-traced, and the rest get what a
      trace records (``local_decomposition``; all three calls of ``to_edge_transform_and_lower``
      for Arm and XNNPACK);
    - torch's Interpreter (every re-trace) shares the provenance chain instead of deep-copying it;
    - full garbage collections skip the objects that existed when the block began
      (``settled_heap.SETTLED_HEAP``: ``gc.freeze()`` until the last scope exits);
    - the edge verifier's dtype check runs once per distinct graph (``verified_graphs``), not
      on every validation of the same unchanged program;
    - torch's ``CapabilityBasedPartitioner`` (Arm's and Core ML's partitioners) keeps which nodes
      lie downstream of which as bitsets, making a node's set when it is read
      (``partition_reachability``), instead of every node's set up front;
    - torch.fx's dead-code elimination asks only nodes without users whether they are impure
      (``dead_code``; the Arm backend runs it once per linear it decomposes);
    - torch.fx compiles each distinct generated source once (``compiled_code``): a graph
      recompiled unchanged reuses the code object;
    - ``to_edge_transform_and_lower``'s two halves build their graph modules lazily and generate
      code only for the programs they hand back (``deferred_lowering``);
    - ``torch.export.export`` is ``export_deferring_recompiles`` (``DEFERRED_EXPORT``): the same
      program, without generating the code of the modules export edits on the way;
    - a strict (Dynamo) export builds the guard function it discards without the
      common-subexpression pass (``export_guards``): the same checks, the same program;
    - ``to_edge``'s lift of tensor constants to placeholders keeps the replay engine's record of
      the calls it re-points (``lifted_constants``): a delegate holding such a call (an LLM's
      RMSNorm ``+ eps`` on Core ML) reuses its recorded value in ``to_executorch`` instead of
      running ExecuTorch's fake kernel over the whole delegated program.

    Holds the process-wide lowering lock; scopes nest; other threads run stock; everything
    is restored when the last scope exits. Stock (with an ``UnprovenVersionWarning``) on
    versions other than ``PROVEN_ON``.
    """
    patches = (
        PATTERN_SKIP, CIA_SCAN, RETRACE_SKIP, SHARED_PROVENANCE, SETTLED_HEAP, VERIFIED_GRAPHS,
        PARTITION_REACHABILITY, COMPILED_CODE, DEFERRED_EXPORT, DEFERRED_LOWERING, DEAD_CODE, EXPORT_GUARDS,
        LIFTED_CONSTANTS,
    )  # fmt: skip
    scopes = (cheaper_replay(), faketensor_cache(), *(patch.scope() for patch in patches))
    with proven_scope("lowerkit-pass-infra", PROVEN_ON, "accelerated_lowering", *scopes):
        yield
