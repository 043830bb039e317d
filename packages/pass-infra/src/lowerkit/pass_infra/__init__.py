"""lowerkit.pass_infra: ExportPass infrastructure that skips untouched graphs, fast-copies
untargeted nodes, replays the rest more cheaply, and proves it changed nothing.

Four jobs, one sub-package each (modules are imported by their own names):

- `framework`: the pass framework (`TargetedPass`, `PassPipeline`, verify mode);
- `accelerations`: scopes that make torch / ExecuTorch internals faster with the same result
  (`accelerated_lowering`, `accelerated_quantization`), over the one patch mechanism and the
  version guards;
- `numerics`: the per-layer numerics both backends' `debug` functions share;
- `helpers`: what every lowerkit package shares (did_you_mean, write_bytes_atomically, ...).

`_upstream` holds every private torch / ExecuTorch name; `errors` the exceptions.

The public names are listed once, below, and load on first use (`helpers.lazy_exports`):
importing the package (or `helpers.suggest` / `helpers.files` / `numerics.sqnr`) does not import
torch or ExecuTorch, so the `lowerkit` command can use the shared helpers and still start fast.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from lowerkit.pass_infra.helpers.lazy_exports import lazy_exports

if TYPE_CHECKING:
    from lowerkit.pass_infra.accelerations.cheaper_replay import (
        cheaper_replay,  # scope: every ExportPass replays without the work stock throws away
        vouch_for,  # mark a graph module's nodes as already checked by a replay
    )
    from lowerkit.pass_infra.accelerations.deferred_export import (
        export_deferring_recompiles,  # torch.export.export's program, less code generated on the way
    )
    from lowerkit.pass_infra.accelerations.fake_cache import (
        EXECUTORCH_NAMESPACES,  # the ExecuTorch op namespaces faketensor_cache adds
        faketensor_cache,  # scope: FakeTensor's dispatch cache extended to ExecuTorch ops
    )
    from lowerkit.pass_infra.accelerations.lowering import (
        accelerated_lowering,  # scope: ExecuTorch's generic lowering stages, any backend, faster
    )
    from lowerkit.pass_infra.accelerations.patching import (
        Patch,  # a named, scoped, reference-counted set of third-party attribute replacements
        Replacement,  # one replaced attribute of a Patch
        lowering_lock,  # the process-wide reentrant lock every lowering entry point holds
        suspend_all,  # every lowerkit patch off for the calling thread, for a block (verify's stock side)
    )
    from lowerkit.pass_infra.accelerations.quantization import (
        accelerated_quantization,  # scope: pt2e prepare / convert faster, the same model
    )
    from lowerkit.pass_infra.accelerations.retrace_skip import (
        DecompositionFallback,  # one run_decompositions that took the whole re-trace, and why
        decomposition_fallbacks,  # scope: collects the DecompositionFallbacks made inside it
    )
    from lowerkit.pass_infra.accelerations.settled_heap import (
        settled_heap,  # scope: full garbage collections skip the heap the lowering started with
    )
    from lowerkit.pass_infra.accelerations.versions import (
        PROVEN_ON,  # the torch / ExecuTorch versions pass-infra's sameness was proven on
        UnprovenVersionWarning,  # warned once when a fast path runs stock on another version
    )
    from lowerkit.pass_infra.errors import (
        PassEquivalenceError,  # verify mode: a fast path gave a graph different from stock's
        PassInfraError,  # a pass-infra API was used wrongly
    )
    from lowerkit.pass_infra.framework.compare import (
        GraphDifference,  # where two graph modules first differ
        first_difference,  # the first structural difference of two graph modules, or None
    )
    from lowerkit.pass_infra.framework.discovery import (
        TARGET_ATTRIBUTES,  # the class attributes discover_targeted_ops reads
        discover_targeted_ops,  # a pass's targeted ops derived from its existing attributes
    )
    from lowerkit.pass_infra.framework.pipeline import (
        PassPipeline,  # runs passes in order with a per-pass report and an optional verify mode
        PassRecord,  # one pass's line of a PipelineReport
        PipelineReport,  # what a PassPipeline run did, pass by pass
        pass_name,  # the name a pipeline reports a pass under
    )
    from lowerkit.pass_infra.framework.targeted_pass import (
        TargetedPass,  # an ExportPass that declares its ops and fast-copies the others
        as_targeted,  # an existing ExportPass (class or instance) run as a TargetedPass
        fast_copy_enabled,  # whether a pass's untargeted nodes are fast-copied
        reference_copy,  # the stock ExportPass twin of a targeted pass (for verify mode)
        should_run,  # whether a pass's targets occur in a graph module
    )
    from lowerkit.pass_infra.helpers.files import (
        write_bytes_atomically,  # the one atomic file writer (no torch import)
    )
    from lowerkit.pass_infra.helpers.graph_ops import (
        cpu_ops,  # the operators a lowered program runs outside its delegates
        delegate_payloads,  # the delegate payloads of a lowered program
        op_name,  # an operator's printable name
    )
    from lowerkit.pass_infra.helpers.inputs import (
        example_input_tuple,  # example inputs as a tuple, or the caller's error
        require_model,  # the model checked to be an nn.Module, or the caller's error
    )
    from lowerkit.pass_infra.helpers.suggest import (
        did_you_mean,  # the one "Did you mean ...?" hint (no torch import)
    )
    from lowerkit.pass_infra.numerics.sqnr import (
        sqnr_db,  # the one signal-to-quantization-noise ratio, in dB
    )

__all__, __getattr__, __dir__ = lazy_exports(__name__)
