"""Stand-in modules live in sys.modules only for the block."""

from __future__ import annotations

import importlib
import json
import sys
import types

import pytest

from lowerkit.pass_infra.helpers.stand_ins import modules_standing_in


def test_a_stand_in_is_imported_in_the_block_and_what_was_there_is_back_after() -> None:
    stand_in = types.ModuleType("json")
    absent = types.ModuleType("lowerkit_no_such_module")
    with modules_standing_in({"json": stand_in, "lowerkit_no_such_module": absent}):
        assert importlib.import_module("json") is stand_in
        assert importlib.import_module("lowerkit_no_such_module") is absent
    assert sys.modules["json"] is json
    assert "lowerkit_no_such_module" not in sys.modules


def test_the_modules_are_restored_when_the_block_raises() -> None:
    with pytest.raises(RuntimeError), modules_standing_in({"json": types.ModuleType("json")}):
        raise RuntimeError("import failed")
    assert sys.modules["json"] is json
