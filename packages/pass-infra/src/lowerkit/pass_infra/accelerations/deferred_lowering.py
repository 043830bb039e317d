"""deferred_lowering: ``to_edge_transform_and_lower`` without generating code nothing runs.

Its two halves, ``_gen_edge_manager_for_partitioners`` (to edge: decompositions, the edge passes)
and ``EdgeProgramManager.to_backend`` (partitioning, each backend's preprocess), build and edit
graph modules hundreds of times: every pass result, program copy and lowered submodule. A plain
``GraphModule`` generates its Python source on every construction and ``recompile()``, ~400
times (2.8 s) in DeiT-tiny's TOSA INT lowering, and nearly none of that code is ever run or read.

Inside `DEFERRED_LOWERING`, a plain ``GraphModule`` built during either half is built as
``SpecKeepingLazyGraphModule`` (torch's lazy class: its code is generated when it is first called,
read as ``.code`` or printed; its pytree specs are set as stock sets them). When the half returns,
every graph module of the manager it returns that was built lazily (each program's, the nested
graphs, and the delegates' original programs) becomes a plain ``GraphModule`` with its code
generated from its final graph, as stock hands it back (`deferred_recompile.make_plain`). Modules
built before the call keep their class; other threads build stock's.
"""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Callable, Iterable, Iterator
from typing import Any

from executorch.exir.lowered_backend_module import LoweredBackendModule
from executorch.exir.program import EdgeProgramManager
from torch.export import ExportedProgram
from torch.fx import GraphModule

from lowerkit.pass_infra import _upstream
from lowerkit.pass_infra.accelerations.deferred_recompile import lazily_made_in, make_plain
from lowerkit.pass_infra.accelerations.patching import Patch, Replacement

__all__ = ["DEFERRED_LOWERING", "building_lazily", "handed_back_graph_modules"]

_STOCK_NEW = GraphModule.__new__
_STOCK_GEN_EDGE_MANAGER = _upstream.stock_gen_edge_manager
_STOCK_TO_BACKEND = EdgeProgramManager.to_backend

_LOCAL = threading.local()


def building_lazily() -> bool:
    """True inside a deferring half in this thread: graph modules it hands on need no code yet."""
    return bool(getattr(_LOCAL, "depth", 0))


@contextlib.contextmanager
def _building_lazily() -> Iterator[None]:
    _LOCAL.depth = getattr(_LOCAL, "depth", 0) + 1
    try:
        yield
    finally:
        _LOCAL.depth -= 1


def _new(cls: type[GraphModule], *args: Any, **kwargs: Any) -> GraphModule:
    """``GraphModule.__new__``; inside a deferring half, a plain GraphModule is built lazily."""
    if cls is GraphModule and building_lazily():
        cls = _upstream.SpecKeepingLazyGraphModule
    return _STOCK_NEW(cls, *args, **kwargs)


def handed_back_graph_modules(programs: Iterable[ExportedProgram]) -> list[GraphModule]:
    """The root graph modules a caller gets with `programs`: each program's, and (recursively)
    the original program's of every delegate they hold."""
    pending = list(programs)
    roots: list[GraphModule] = []
    while pending:
        graph_module = pending.pop().graph_module
        roots.append(graph_module)
        pending.extend(m.original_module for m in graph_module.modules() if isinstance(m, LoweredBackendModule))
    return roots


def _programs(manager: EdgeProgramManager) -> list[ExportedProgram]:
    return [manager.exported_program(method) for method in sorted(manager.methods)]


def _lazy_before(programs: Iterable[ExportedProgram]) -> set[int]:
    return {made for root in handed_back_graph_modules(programs) for made in lazily_made_in(root)}


def _deferring(
    stock: Callable[..., EdgeProgramManager], given: Iterable[ExportedProgram], *args: Any, **kwargs: Any
) -> EdgeProgramManager:
    """``stock(*args, **kwargs)`` building graph modules lazily, its manager's modules handed back
    plain (the `given` programs' lazily made modules stay as the caller had them)."""
    lazy_before = _lazy_before(given)
    with _building_lazily():
        manager = stock(*args, **kwargs)
    for root in handed_back_graph_modules(_programs(manager)):
        make_plain(root, lazy_before)
    return manager


def _gen_edge_manager_deferring(
    partitioner: Any, aten_programs: dict[str, ExportedProgram], *args: Any, **kwargs: Any
) -> EdgeProgramManager:
    """``_gen_edge_manager_for_partitioners``, generating code only for the programs it returns."""
    return _deferring(_STOCK_GEN_EDGE_MANAGER, aten_programs.values(), partitioner, aten_programs, *args, **kwargs)


def _to_backend_deferring(self: EdgeProgramManager, *args: Any, **kwargs: Any) -> EdgeProgramManager:
    """``EdgeProgramManager.to_backend``, generating code only for the programs it returns."""
    return _deferring(_STOCK_TO_BACKEND, _programs(self), self, *args, **kwargs)


#: Held by ``accelerated_lowering()``.
DEFERRED_LOWERING = Patch(
    "lowerkit.pass_infra.accelerations.deferred_lowering",
    lambda: [
        Replacement(GraphModule, "__new__", staticmethod(_new)),
        Replacement(_upstream.exir_program_module, _upstream.GEN_EDGE_MANAGER, _gen_edge_manager_deferring),
        Replacement(EdgeProgramManager, "to_backend", _to_backend_deferring),
    ],
)
