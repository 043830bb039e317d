"""lazy_copies: the copies of an ExportedProgram that `local_decomposition` edits generate their code once.

Within a `LAZY_COPIES` scope (held by `local_decomposition` around its copy of the program),
torch's ``_create_graph_module_for_export`` builds a ``_LazyGraphModule``
(`_upstream.lazy_export_graph_module`): the copy's graph changes before anything runs it, so its
code is generated once, from the final graph (`deferred_recompile.plain_graph_module`), not at
each construction.
"""

from __future__ import annotations

from lowerkit.pass_infra import _upstream
from lowerkit.pass_infra.accelerations.patching import Patch, Replacement

__all__ = ["LAZY_COPIES"]

#: Within its scope ExportedProgram builds lazily compiled graph modules: the copy's graph changes
#: before anything runs it, so its code is generated once, at the end, not at each construction.
LAZY_COPIES = Patch(
    "lowerkit.pass_infra.accelerations.lazy_copies",
    lambda: [
        Replacement(_upstream.exported_program_module(), _upstream.EXPORT_GRAPH_MODULE, _upstream.lazy_export_graph_module)
    ],
)
