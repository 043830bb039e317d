"""docs/architecture.md holds the table of accelerations as ``lowerkit accelerations`` makes it now."""

from __future__ import annotations

from pathlib import Path

from click.testing import CliRunner

from lowerkit.cli.accelerations import BEGIN, END, accelerations_command, table, with_table

ARCHITECTURE = Path(__file__).resolve().parents[2] / "docs" / "architecture.md"


def test_the_architecture_doc_holds_the_current_table() -> None:
    text = ARCHITECTURE.read_text()
    assert text.count(BEGIN) == 1 and text.count(END) == 1
    assert with_table(text, table()) == text, (
        "docs/architecture.md's table of accelerations is stale: run "
        "`lowerkit accelerations --update docs/architecture.md`"
    )


def test_update_rewrites_only_the_generated_section(tmp_path: Path) -> None:
    doc = tmp_path / "doc.md"
    doc.write_text(f"# Title\n\n{BEGIN}\n| stale |\n{END}\n\nafter\n")
    printed = CliRunner().invoke(accelerations_command, [])
    assert printed.exit_code == 0 and printed.output == table()
    updated = CliRunner().invoke(accelerations_command, ["--update", str(doc)])
    assert updated.exit_code == 0 and updated.output == ""
    assert doc.read_text() == f"# Title\n\n{BEGIN}\n{table()}{END}\n\nafter\n"
    doc.write_text("no section\n")
    refused = CliRunner().invoke(accelerations_command, ["--update", str(doc)])
    assert refused.exit_code == 1 and "no" in refused.output and doc.read_text() == "no section\n"
