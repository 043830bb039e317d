"""The table of accelerations lists every Patch pass-infra makes, each named after its module."""

from __future__ import annotations

from lowerkit.pass_infra.accelerations.table import ACCELERATIONS, markdown, patches_defined_in


def test_the_table_lists_every_patch_of_pass_infra_once() -> None:
    listed = [row.patch for row in ACCELERATIONS]
    assert len({id(p) for p in listed}) == len(listed)
    made = patches_defined_in("lowerkit.pass_infra")
    assert sorted(p.name for p in made) == sorted(p.name for p in listed)
    assert {id(p) for p in made} == {id(p) for p in listed}


def test_each_patch_is_named_after_the_module_that_makes_it() -> None:
    for patch in patches_defined_in("lowerkit.pass_infra"):
        assert patch.name == patch.module, patch


def test_each_row_says_what_it_replaces() -> None:
    for row in ACCELERATIONS:
        assert row.scopes and row.stage and (row.replaced() or row.hooks), row.patch.name
    table = markdown(ACCELERATIONS)
    assert table.count("\n") == len(ACCELERATIONS) + 2
    assert "`torch.export.exported_program:ExportedProgram.run_decompositions`" in table
