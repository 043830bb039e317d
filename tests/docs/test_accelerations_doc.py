"""docs/architecture.md holds the table of accelerations as ``lowerkit accelerations`` makes it now."""

from __future__ import annotations

from pathlib import Path

from lowerkit.cli.accelerations import BEGIN, END, table, with_table

ARCHITECTURE = Path(__file__).resolve().parents[2] / "docs" / "architecture.md"


def test_the_architecture_doc_holds_the_current_table() -> None:
    text = ARCHITECTURE.read_text()
    assert text.count(BEGIN) == 1 and text.count(END) == 1
    assert with_table(text, table()) == text, (
        "docs/architecture.md's table of accelerations is stale: run "
        "`lowerkit accelerations --update docs/architecture.md`"
    )
