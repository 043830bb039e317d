"""The table of accelerations: what `audit` reports, and pass-infra's rows."""

from __future__ import annotations

from lowerkit.pass_infra.accelerations.patching import Patch, Replacement
from lowerkit.pass_infra.accelerations.table import ACCELERATIONS, Acceleration, audit, markdown


class _Upstream:
    def method(self) -> str:
        return "stock"


def _ours(self: object) -> str:
    return "ours"


def test_audit_names_an_unlisted_patch_a_misnamed_one_and_an_unhashed_replacement() -> None:
    misnamed = Patch("somewhere.else", lambda: [Replacement(_Upstream, "method", _ours)])
    rows = [Acceleration(misnamed, ("a scope",), "a stage")]
    hashed = {f"{__name__}:_Upstream.method"}
    assert audit(__name__, rows, hashed) == [f"somewhere.else: made by {__name__}, named otherwise"]
    assert audit(__name__, rows, set()) == [
        f"somewhere.else: made by {__name__}, named otherwise",
        f"somewhere.else: {__name__}:_Upstream.method: no source hash",
    ]
    assert audit(__name__, [], hashed) == [
        "somewhere.else: not in the table",
        f"somewhere.else: made by {__name__}, named otherwise",
    ]


def test_each_row_says_what_it_replaces() -> None:
    for row in ACCELERATIONS:
        assert row.scopes and row.stage and (row.replaced() or row.hooks), row.patch.name
    table = markdown(ACCELERATIONS)
    assert table.count("\n") == len(ACCELERATIONS) + 2
    assert "`torch.export.exported_program:ExportedProgram.run_decompositions`" in table
