"""The public-API rule holds over the packages' ``__init__`` files (see `house.public_api`)."""

from __future__ import annotations

import textwrap
from pathlib import Path

from house.imports import modules
from house.public_api import undocumented


def _package(root: Path, init: str) -> Path:
    path = root / "packages" / "demo" / "src" / "lowerkit" / "demo" / "__init__.py"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(textwrap.dedent(init))
    return root


def test_every_packages_public_names_are_documented_once() -> None:
    assert undocumented() == []


def test_an_eager_facade_documents_each_name_on_its_line(tmp_path: Path) -> None:
    found = modules(_package(tmp_path, '''
        from lowerkit.demo.core import a, b, c
        __all__ = [
            "a",  # the a
            "b",
            "c", "a",  # the c
        ]
    '''))
    hits = [hit.split(": ", 1)[1] for hit in undocumented(found)]
    assert hits == [
        "b needs its own line with a one-line doc comment",
        "c needs its own line with a one-line doc comment",
        "a is listed twice",
        "a needs its own line with a one-line doc comment",
    ]


def test_a_lazy_facade_documents_its_type_checking_imports(tmp_path: Path) -> None:
    found = modules(_package(tmp_path, '''
        from typing import TYPE_CHECKING
        from lowerkit.pass_infra.helpers.lazy_exports import lazy_exports
        if TYPE_CHECKING:
            from lowerkit.demo.core import (
                a,  # the a
                b,
            )
        __all__, __getattr__, __dir__ = lazy_exports(__name__)
    '''))
    assert [hit.split(": ", 1)[1] for hit in undocumented(found)] == ["b needs its own line with a one-line doc comment"]
