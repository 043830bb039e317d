"""torch.fx's dead-code elimination asks only the nodes without users whether they are impure.

``Graph.eliminate_dead_code`` walks the graph backwards and erases each node for which
``not node.is_impure() and len(node.users) == 0``: it asks every node first (for a
call_function, a schema, side-effect table and effect-registry lookup), although only a node
without users can go. ExecuTorch's Arm ``DecomposeLinearPass`` runs it once per linear it
rewrites: 73 walks of ~4,000 nodes, 180,000 purity checks, on DeiT-tiny's TOSA INT lowering.

`DEAD_CODE` runs torch's own function with a side-effect test that answers "impure" for a node
that has users without asking it: such a node is kept either way, and ``Node.is_impure`` is a
query that changes nothing, so the same nodes are erased in the same order (same graph, same
names, same log). Nodes without users are asked as stock asks them (with stock's
``impure_random``); call_module nodes are always asked (their check raises on a graph without an
owning module or without the submodule, as stock). A caller's own ``is_impure_node`` gets
stock's function unchanged.
"""

from __future__ import annotations

from collections.abc import Callable

import torch
from torch.fx import Graph, Node

from lowerkit.pass_infra import _upstream
from lowerkit.pass_infra.accelerations.patching import Patch, Replacement

__all__ = ["DEAD_CODE", "eliminate_dead_code"]

#: torch's own ``Graph.eliminate_dead_code`` (taken at import: before any lowerkit scope).
STOCK_ELIMINATE_DEAD_CODE = torch.fx.Graph.eliminate_dead_code


def eliminate_dead_code(self: Graph, is_impure_node: Callable[[Node], bool] | None = None) -> bool:
    """``Graph.eliminate_dead_code``: stock's, with purity asked of the nodes it can erase only."""
    if is_impure_node is not None:
        return bool(STOCK_ELIMINATE_DEAD_CODE(self, is_impure_node))
    impure_random = _upstream.dead_code_impure_random()

    def has_side_effect(node: Node) -> bool:
        if node.users and node.op != "call_module":
            return True  # kept whatever it answers: stock erases only nodes without users
        return node.is_impure(impure_random)

    return bool(STOCK_ELIMINATE_DEAD_CODE(self, has_side_effect))


#: Held by ``accelerated_lowering()`` and ``accelerated_quantization()``.
DEAD_CODE = Patch(
    "lowerkit.pass_infra.accelerations.dead_code",
    lambda: [Replacement(Graph, "eliminate_dead_code", eliminate_dead_code)],
)
