"""deferred_export: ``torch.export.export`` without generating code nothing runs.

`export_deferring_recompiles` is ``torch.export.export`` under `deferred_recompile`'s rule: torch's export
recompiles its traced module after each of its own passes (placeholder naming, the set_grad /
autocast higher-order-op passes, runtime assertions), ~0.9 s of DeiT-tiny's 5 s re-export. Under
torch's lazy-graph-module switch those only mark the code stale; the program's graph module is
built plain, as stock builds it, and nested graph modules made lazily come back plain.
`DEFERRED_EXPORT` makes a user's own ``torch.export.export`` calls inside ``accelerated_lowering()``
/ ``accelerated_quantization()`` this export (the attribute: a name bound by
``from torch.export import export`` before the scope stays torch's).
"""

from __future__ import annotations

from typing import Any

import torch
from torch.export import ExportedProgram

from lowerkit.pass_infra import _upstream
from lowerkit.pass_infra.accelerations.deferred_recompile import lazily_made_in, make_plain
from lowerkit.pass_infra.accelerations.patching import Patch, Replacement
from lowerkit.pass_infra.accelerations.versions import PROVEN_ON, proven

__all__ = ["DEFERRED_EXPORT", "export_deferring_recompiles"]

#: torch's export, as imported (inside a `DEFERRED_EXPORT` scope the attribute is this module's).
_STOCK_EXPORT = torch.export.export


def export_deferring_recompiles(*args: Any, **kwargs: Any) -> ExportedProgram:
    """``torch.export.export``, called as it is called (the model's keyword inputs may be the third
    positional argument): the same program, without generating the code of the modules export
    traces and edits on the way. torch's own export on unproven versions, and for a strict (Dynamo)
    export: torch's strict path reads the ``_in_spec`` that only a real recompile sets (its own
    TODO on lazy graph modules, T207713214), so it fails on every program under the lazy switch."""
    if kwargs.get("strict") or not proven("lowerkit-pass-infra", PROVEN_ON, "export_deferring_recompiles"):
        return _STOCK_EXPORT(*args, **kwargs)
    lazy_before = lazily_made_in(args[0] if args else kwargs["mod"])
    with _upstream.lazy_graph_modules():
        program = _STOCK_EXPORT(*args, **kwargs)
    make_plain(program.graph_module, lazy_before)
    return program


#: ``torch.export.export`` is `export_deferring_recompiles` (held by ``accelerated_lowering()`` and
#: ``accelerated_quantization()``, so the exports of a script inside them are faster too).
DEFERRED_EXPORT = Patch(
    "lowerkit.pass_infra.accelerations.deferred_export",
    lambda: [Replacement(torch.export, "export", export_deferring_recompiles)],
)
