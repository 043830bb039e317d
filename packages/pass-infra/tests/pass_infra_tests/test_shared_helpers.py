"""The helpers every lowerkit package shares: did_you_mean, write_bytes_atomically, sqnr_db."""

from __future__ import annotations

import math
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import torch

from lowerkit.pass_infra import did_you_mean, sqnr_db, write_bytes_atomically


def test_did_you_mean_names_the_closest() -> None:
    assert did_you_mean("resnet9", ["resnet8", "ds_cnn"]) == " Did you mean 'resnet8'?"
    assert did_you_mean("zzzz", ["resnet8"]) == ""
    assert did_you_mean("IOS18", {"ios18": "iOS18"}, ignore_case=True) == " Did you mean 'iOS18'?"
    both = did_you_mean("fp36", ["fp16", "fp32", "int8"], n=2)
    assert both in (" Did you mean 'fp32' or 'fp16'?", " Did you mean 'fp16' or 'fp32'?"), both


def test_atomic_write_replaces_and_leaves_no_temporary(tmp_path: Path) -> None:
    target = tmp_path / "model.pte"
    target.write_bytes(b"old")
    assert write_bytes_atomically(target, b"new bytes") == target
    assert target.read_bytes() == b"new bytes"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["model.pte"]


def test_atomic_write_failure_keeps_the_old_file(tmp_path: Path) -> None:
    target = tmp_path / "model.pte"
    target.write_bytes(b"old")

    with pytest.raises(TypeError):
        write_bytes_atomically(target, "not bytes")  # type: ignore[arg-type]
    assert target.read_bytes() == b"old"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["model.pte"]
    with pytest.raises(FileNotFoundError):
        write_bytes_atomically(tmp_path / "missing" / "model.pte", b"x")


def test_sqnr_from_known_values() -> None:
    assert sqnr_db(np.array([1.0, 1.0]), np.array([1.0, 0.0])) == pytest.approx(10 * math.log10(2))
    assert sqnr_db(np.ones(3), np.ones(3)) == math.inf
    assert sqnr_db(np.zeros(3), np.ones(3)) == -math.inf
    # Several outputs count as one signal; tensors are accepted as they are.
    pair = ([torch.tensor([1.0]), torch.tensor([1.0])], [torch.tensor([1.0]), torch.tensor([0.0])])
    assert sqnr_db(*pair) == pytest.approx(10 * math.log10(2))
    with pytest.raises(ValueError):
        sqnr_db([np.ones(1)], [np.ones(1), np.ones(1)])


def test_shared_helpers_import_neither_torch_nor_executorch() -> None:
    code = (
        "import sys\n"
        "from lowerkit.pass_infra import did_you_mean, write_bytes_atomically\n"
        "heavy = [m for m in sys.modules if m.split('.')[0] in ('torch', 'executorch', 'numpy')]\n"
        "print(heavy)\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert done.stdout.strip() == "[]"


def test_the_facade_lists_each_name_once_and_loads_it_from_its_module() -> None:
    import importlib

    import lowerkit.pass_infra as facade
    from lowerkit.pass_infra.helpers.lazy_exports import exported_names

    table = exported_names("lowerkit.pass_infra")
    assert facade.__all__ == sorted(table) == dir(facade)
    for name, module in table.items():
        assert getattr(facade, name) is getattr(importlib.import_module(module), name), name
    with pytest.raises(AttributeError, match="no_such_name"):
        facade.no_such_name  # noqa: B018
