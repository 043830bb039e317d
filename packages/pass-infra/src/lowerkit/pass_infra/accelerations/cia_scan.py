"""run_decompositions without repeated work: the CompositeImplicitAutograd op scan once per call.

``ExportedProgram.run_decompositions`` (and ExecuTorch's decomposition tables) collect every
preservable CompositeImplicitAutograd op; stock re-materializes all C++ CIA registrations once
per op namespace (~40 times per collection). `CIA_SCAN` makes it once per collection, with
the same result (`_upstream_cia_scan.collect_all_valid_cia_ops`), and ``py_impl`` (called ~6,000 times
per table to override and restore CIA kernels) stops building typing aliases per call
(`_upstream_cia_scan.plain_py_impl`); the override itself registers those kernels by assignment
(`_upstream_cia_scan.override_composite_implicit_decomp`): the same kernels for the same ops and keys.
"""

from __future__ import annotations

from lowerkit.pass_infra import _upstream
from lowerkit.pass_infra.accelerations import _upstream_cia_scan
from lowerkit.pass_infra.accelerations.patching import Patch, Replacement

__all__ = ["CIA_SCAN"]

_NAME = "_collect_all_valid_cia_ops"


def _replacements() -> list[Replacement]:
    return [
        *(
            Replacement(module, _NAME, _upstream_cia_scan.collect_all_valid_cia_ops)
            for module in _upstream_cia_scan.cia_collect_sites()
        ),
        Replacement(_upstream_cia_scan.py_impl_owner(), "py_impl", _upstream_cia_scan.plain_py_impl),
        Replacement(
            _upstream.exported_program_module(),
            "_override_composite_implicit_decomp",
            _upstream_cia_scan.override_composite_implicit_decomp,
        ),
    ]


#: Held by ``accelerated_lowering()``.
CIA_SCAN = Patch("lowerkit.pass_infra.accelerations.cia_scan", _replacements)
