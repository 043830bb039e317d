"""torch's Interpreter records provenance without deep-copying the chain.

``torch.fx.Interpreter.run_node`` (run for every node of every re-trace, e.g. each
``run_decompositions``) enters ``torch.fx.traceback.set_current_meta``, whose
``NodeSource(node, ...)`` deep-copies the node's whole ``meta["from_node"]`` chain; the chain
grows with every pass, so the copies do too. `SHARED_PROVENANCE` makes it share the chain's
(immutable in practice) NodeSource objects: equal provenance (``==``, ``to_dict()``), as
``cheaper_replay()`` already does for ExportPass replays (`_upstream.shared_current_meta`).
"""

from __future__ import annotations

from lowerkit.pass_infra import _upstream
from lowerkit.pass_infra.accelerations.patching import Patch, Replacement

__all__ = ["SHARED_PROVENANCE"]


def _replacements() -> list[Replacement]:
    return [
        Replacement(
            _upstream.fx_traceback_module(), "set_current_meta", _upstream.shared_current_meta
        )
    ]


#: Held by ``accelerated_lowering()`` and ``accelerated_quantization()``.
SHARED_PROVENANCE = Patch("lowerkit.pass_infra.accelerations.shared_provenance", _replacements)
