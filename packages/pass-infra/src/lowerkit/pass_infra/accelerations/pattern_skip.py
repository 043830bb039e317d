"""Backend pattern passes that cannot match: skip building and matching their patterns.

A pattern pass (XNNPACK's ``ConvertToSDPAPass``, ``ConvertToUpsampleBilinear2d``) builds pattern
graphs and hands each to ``SubgraphMatcher``, which pairs every pattern op node with a graph
node of an equal target. When the graph holds no node whose target equals one of the ops that
every pattern contains, nothing can match: stock would only build the patterns, find no match,
recompile and replay. The skip does just the recompile and replay (same result), without
building the patterns.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from typing import Any

from torch.fx import GraphModule
from torch.fx.passes.infra.pass_base import PassResult

from lowerkit.pass_infra import _upstream
from lowerkit.pass_infra.accelerations.patching import Patch, Replacement

__all__ = ["PATTERN_SKIP", "cannot_match", "pattern_passes"]


def pattern_passes() -> list[tuple[type, tuple[Any, ...], Callable[[], Any]]]:
    """(pass class, ops in every pattern, pattern getter) for each known backend pattern pass."""
    return _upstream.xnnpack_pattern_passes()


def cannot_match(graph_module: GraphModule, required: Sequence[Any]) -> bool:
    """True when some op of `required` equals no node target of the graph (as SubgraphMatcher compares)."""
    targets = [n.target for n in graph_module.graph.nodes if n.op == "call_function"]
    return any(not any(t == op for t in targets) for op in required)


def _skipping_call(owner: type, required: tuple[Any, ...]) -> Callable[..., Any]:
    stock = vars(owner)["call"]
    logger = logging.getLogger(owner.__module__)

    def call(self: Any, graph_module: GraphModule) -> PassResult:
        if logger.isEnabledFor(logging.DEBUG) or not cannot_match(graph_module, required):
            return stock(self, graph_module)
        # What stock's call does when no pattern matches.
        graph_module.recompile()
        result = super(owner, self).call(graph_module)  # type: ignore[arg-type]
        return PassResult(result.graph_module, True)

    call.__name__ = "call"
    call.__qualname__ = f"{owner.__qualname__}.call"
    return call


def _replacements() -> list[Replacement]:
    return [
        Replacement(owner, "call", _skipping_call(owner, required))
        for owner, required, _ in pattern_passes()
    ]


#: Held by ``accelerated_lowering()``: pattern passes skip patterns that cannot match.
PATTERN_SKIP = Patch("lowerkit.pass_infra.accelerations.pattern_skip", _replacements)
