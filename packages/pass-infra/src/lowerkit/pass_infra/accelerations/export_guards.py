"""A strict export's guard function is built without Dynamo's common-subexpression pass.

A strict (Dynamo) ``torch.export.export`` builds the traced frame's guards only to learn whether
a shape constraint is violated (``_suggest_or_raise_constraint_violation``), then drops them.
Export keeps static shapes, so the shape guard checks every dimension of every input, parameter
and buffer (543 checks on an 8-layer Llama), and torch's ``build_guard_function`` first runs
``PyExprCSEPass`` over them, parsing and unparsing every subexpression of every check: most of
the time spent on guards, which grows with the model.

`EXPORT_GUARDS` builds an export's guard function the way torch builds it when that pass hits
the recursion limit (``build_guard_function``'s fallback): the same checks in the same order,
without hoisted subexpressions. The shape guards are produced as stock (constraint violations
raise as stock) and the exported program is stock's; guards built for ``torch.compile`` keep
the pass. Only the text of the discarded guard function differs (in Dynamo's debug log).
"""

from __future__ import annotations

from lowerkit.pass_infra.accelerations import _upstream_export_guards as upstream
from lowerkit.pass_infra.accelerations.patching import Patch, Replacement

__all__ = ["EXPORT_GUARDS"]


def _replacements() -> list[Replacement]:
    return [
        Replacement(upstream.GuardBuilder, "add_python_lambda_leaf_guard_to_root", upstream.add_lambda_guard),
        Replacement(upstream.PyExprCSEPass, "count", upstream.count),
        Replacement(upstream.PyExprCSEPass, "replace", upstream.replace),
    ]


#: Held by ``accelerated_lowering()`` and ``accelerated_quantization()``.
EXPORT_GUARDS = Patch("lowerkit.pass_infra.accelerations.export_guards", _replacements)
