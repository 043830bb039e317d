"""The import rules hold over the packages' sources (see `house.imports`)."""

from __future__ import annotations

import textwrap
from pathlib import Path

from house.imports import cycles, facade_imports, modules, private_imports


def _tree(root: Path, files: dict[str, str]) -> Path:
    for relative, text in files.items():
        path = root / "packages" / "demo" / "src" / relative
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(textwrap.dedent(text))
    return root


def test_the_packages_have_no_import_cycle() -> None:
    found = modules()
    assert "lowerkit.pass_infra" in found and "lowerkit.cli.app" in found
    assert cycles(found) == []


def test_no_module_imports_another_modules_private_name_or_a_name_from_a_package_facade() -> None:
    assert private_imports() == []
    assert facade_imports() == []


def test_a_lazy_import_through_the_package_facade_is_a_cycle(tmp_path: Path) -> None:
    found = modules(_tree(tmp_path, {
        "lowerkit/demo/__init__.py": "from lowerkit.demo.core import run\n",
        "lowerkit/demo/core.py": "def run():\n    from lowerkit.demo import helper\n    from lowerkit.demo import run as again\n",
        "lowerkit/demo/helper.py": "X = 1\n",
    }))  # fmt: skip
    assert cycles(found) == [["lowerkit.demo", "lowerkit.demo.core"]]
    [hit] = facade_imports(found)  # `helper` is a submodule: imported by name, fine
    assert hit.endswith("lowerkit.demo.core imports lowerkit.demo.run from the package facade")


def test_importing_a_submodule_by_name_is_no_cycle(tmp_path: Path) -> None:
    found = modules(_tree(tmp_path, {
        "lowerkit/demo/__init__.py": "from lowerkit.demo.core import run\n",
        "lowerkit/demo/core.py": "from lowerkit.demo import _upstream, helper\n",
        "lowerkit/demo/helper.py": "X = 1\n",
        "lowerkit/demo/_upstream.py": "Y = 2\n",
    }))  # fmt: skip
    assert cycles(found) == []
    assert private_imports(found) == facade_imports(found) == []


def test_a_private_name_from_another_module_is_reported(tmp_path: Path) -> None:
    found = modules(_tree(tmp_path, {
        "lowerkit/demo/a.py": "def _helper():\n    pass\n",
        "lowerkit/demo/b.py": "from lowerkit.demo.a import (\n    _helper,\n)\n",
    }))  # fmt: skip
    [hit] = private_imports(found)
    assert hit.endswith("lowerkit.demo.b imports lowerkit.demo.a._helper")

