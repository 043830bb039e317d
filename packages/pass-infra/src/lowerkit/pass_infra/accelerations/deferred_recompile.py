"""Deferred recompile: inside a torch PassManager call, replayed graph modules get their code once.

``torch.fx.passes.infra.pass_manager.PassManager`` calls ``module.recompile()`` after every
pass, and every ``ExportPass`` replay builds a new ``GraphModule``, which compiles its code in
its constructor: the Arm quantizer's ``transform_for_annotation`` pipeline (~55 passes) spent a
third of ``prepare_pt2e`` on a 9-layer CNN generating and ``exec``-ing code nothing ran.

``cheaper_replay()`` builds replayed modules as ``_LazyGraphModule``s (torch's own class: its
``recompile()`` marks the code stale; reading ``.code``, printing or calling the module
generates it first). Under `DEFERRED_RECOMPILE`, when a PassManager call returns, every graph
module the call built lazily and hands back (the result and its nested graphs) becomes a plain
``GraphModule`` with its code generated from its final graph, as stock leaves it: the caller
gets the classes, graphs and code stock gives. The module handed to the call is left to stock:
a pass may edit it in place and then return a replay, and stock leaves it running the code of
its last recompile (``prepare_pt2e``'s input module keeps computing the float model); so does
this.
`export_deferring_recompiles` (`deferred_export`) applies the same rule to ``torch.export.export``.
"""

from __future__ import annotations

from typing import Any

import torch
from torch.fx import GraphModule
from torch.fx.passes.infra.pass_manager import PassManager

from lowerkit.pass_infra._upstream import LazyGraphModule, SpecKeepingLazyGraphModule
from lowerkit.pass_infra.accelerations.patching import Patch, Replacement

__all__ = ["DEFERRED_RECOMPILE", "lazily_made_in", "make_plain", "plain_graph_module"]

_STOCK_CALL = PassManager.__call__


def _per_instance(cls: type) -> bool:
    # As GraphModule.__new__ tells its per-instance classes (their __name__ is the module's name).
    return cls.__qualname__.split(".")[-1] == "GraphModuleImpl"


#: The classes a lazily built graph module's per-instance class derives from.
_LAZY_BASES = ((LazyGraphModule,), (SpecKeepingLazyGraphModule,))


def _lazily_made(module: Any) -> bool:
    cls = type(module)
    return isinstance(module, GraphModule) and _per_instance(cls) and cls.__bases__ in _LAZY_BASES


def plain_graph_module(module: GraphModule) -> None:
    """Turn a lazily built graph module into a plain GraphModule with its code generated (in place)."""
    plain = type("GraphModuleImpl", (GraphModule,), {})
    plain.__name__ = type(module).__name__  # the module's name (GraphModule.__init__ sets it)
    module.__class__ = plain
    module.recompile()


def lazily_made_in(module: Any) -> set[int]:
    """The ids of the graph modules in `module` (itself included) built lazily."""
    return {id(m) for m in module.modules() if _lazily_made(m)} if isinstance(module, torch.nn.Module) else set()


def make_plain(module: GraphModule, lazy_before: set[int]) -> None:
    """Graph modules in `module` (itself included) built lazily, except those in `lazy_before`, become plain."""
    # Children first: a parent's recompile() recompiles its children too.
    for made in reversed(list(module.modules())):
        if _lazily_made(made) and id(made) not in lazy_before:
            plain_graph_module(made)


def call_with_deferred_recompile(self: PassManager, module: Any) -> Any:
    """``PassManager.__call__``; graph modules the passes made lazily come back plain and compiled."""
    lazy_before = lazily_made_in(module)
    result = _STOCK_CALL(self, module)
    returned = getattr(result, "graph_module", None)
    if isinstance(returned, GraphModule):
        make_plain(returned, lazy_before)
    return result


#: Held by ``accelerated_quantization()``.
DEFERRED_RECOMPILE = Patch(
    "lowerkit.pass_infra.accelerations.deferred_recompile",
    lambda: [Replacement(PassManager, "__call__", call_with_deferred_recompile)],
)
