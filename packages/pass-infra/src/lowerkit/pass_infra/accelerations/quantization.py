"""accelerated_quantization: pt2e ``prepare_pt2e`` / ``convert_pt2e`` faster, the same quantized model."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

from lowerkit.pass_infra.accelerations.attribute_names import FRESH_ATTRIBUTE_NAMES
from lowerkit.pass_infra.accelerations.cheaper_replay import cheaper_replay
from lowerkit.pass_infra.accelerations.compiled_code import COMPILED_CODE
from lowerkit.pass_infra.accelerations.dead_code import DEAD_CODE
from lowerkit.pass_infra.accelerations.deferred_export import DEFERRED_EXPORT
from lowerkit.pass_infra.accelerations.deferred_recompile import DEFERRED_RECOMPILE
from lowerkit.pass_infra.accelerations.export_guards import EXPORT_GUARDS
from lowerkit.pass_infra.accelerations.fake_cache import faketensor_cache
from lowerkit.pass_infra.accelerations.histogram_search import HISTOGRAM_SEARCH
from lowerkit.pass_infra.accelerations.settled_heap import SETTLED_HEAP
from lowerkit.pass_infra.accelerations.shared_provenance import SHARED_PROVENANCE
from lowerkit.pass_infra.accelerations.versions import proven_scope

__all__ = ["QUANTIZATION_PROVEN_ON", "accelerated_quantization"]

#: The versions the quantization path was proven on (torchao's observer is what it replaces).
QUANTIZATION_PROVEN_ON = {"torch": "2.13.0", "torchao": "0.18.0"}


@contextmanager
def accelerated_quantization() -> Iterator[None]:
    """Within the block, pt2e quantization (``prepare_pt2e``, calibration, ``convert_pt2e``) runs faster.

    The same quantized model, bit for bit, for any quantizer: torchao's ``HistogramObserver``
    (the activation observer of ExecuTorch's Arm and XNNPACK quantizers) finds its min / max
    with the same steps on Python floats instead of 0-d tensors (`histogram_search`), and the
    ``ExportPass``es a quantizer runs before annotating (e.g. the Arm quantizer's
    ``transform_for_annotation`` pipeline) replay under ``cheaper_replay()`` and
    ``faketensor_cache()``, building graph modules whose code is generated once, when a torch
    ``PassManager`` call hands them back as plain ``GraphModule``s (``deferred_recompile``), not
    after every pass: the prepared and converted modules are stock's, class, code and graph;
    a generated source is compiled once (``compiled_code``); full garbage collections skip the
    objects that existed when the block began (``settled_heap.SETTLED_HEAP``); observers, scales
    and zero points get their fresh names without a walk from zero (``attribute_names``);
    ``torch.export.export`` (the export before ``prepare_pt2e``, the re-export after
    ``convert_pt2e``) is ``export_deferring_recompiles``: the same program; a strict export
    builds the guard function it discards without the subexpression pass (``export_guards``);
    torch's Interpreter (each export's trace) shares the provenance chain
    (``shared_provenance``) and dead-code elimination asks only nodes without users whether
    they are impure (``dead_code``; the Arm quantizer's decompositions run it).

    Holds the process-wide lowering lock; scopes nest; other threads run stock; everything
    is restored when the last scope exits. Stock (with an ``UnprovenVersionWarning``) on
    versions other than ``QUANTIZATION_PROVEN_ON``.
    """
    scopes = (
        HISTOGRAM_SEARCH.scope(), cheaper_replay(), DEFERRED_RECOMPILE.scope(), faketensor_cache(),
        SETTLED_HEAP.scope(), COMPILED_CODE.scope(), FRESH_ATTRIBUTE_NAMES.scope(), DEFERRED_EXPORT.scope(),
        EXPORT_GUARDS.scope(), SHARED_PROVENANCE.scope(), DEAD_CODE.scope(),
    )  # fmt: skip
    with proven_scope("lowerkit-pass-infra", QUANTIZATION_PROVEN_ON, "accelerated_quantization", *scopes):
        yield
