"""The house rules on imports, checked statically over every package's sources.

* No import cycles among lowerkit's modules. ``from package import name`` is an edge to the
  submodule ``package.name`` when there is one, else to the package itself (its ``__init__``).
  Imports inside functions count too: a lazy import only hides a cycle.
* No module imports another module's private (``_name``) name; the packages' ``_upstream`` modules
  (``_upstream.py`` and the per-acceleration ``_upstream_<name>.py``), which hold third-party
  private names, are the exception as a whole (they are imported by name,
  ``from lowerkit.x import _upstream``).
* No module imports a name from a package facade (an ``__init__``), its own package's or
  another's: it imports the name from the module that defines it (``from package import module``
  is fine). The facades are for users; inside lowerkit they would only make cycles.

``python -m house.imports`` (from ``tools/``) prints both; the tests in this folder hold them.
"""

from __future__ import annotations

import ast
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

__all__ = ["Module", "cycles", "facade_imports", "modules", "private_imports"]

REPO = Path(__file__).resolve().parents[2]


@dataclass(frozen=True)
class Module:
    """One first-party module: its dotted name and file."""

    name: str
    path: Path


def modules(repo: Path = REPO) -> dict[str, Module]:
    """Every module under ``packages/*/src``, by dotted name."""
    found: dict[str, Module] = {}
    for root in sorted((repo / "packages").glob("*/src")):
        for path in sorted(root.rglob("*.py")):
            parts = list(path.relative_to(root).with_suffix("").parts)
            if parts[-1] == "__init__":
                parts.pop()
            name = ".".join(parts)
            found[name] = Module(name, path)
    return found


def _imports(module: Module) -> Iterator[tuple[int, str, list[str]]]:
    """(line, imported module, names) for every absolute import in `module`."""
    for node in ast.walk(ast.parse(module.path.read_text(), str(module.path))):
        if isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            yield node.lineno, node.module, [alias.name for alias in node.names]
        elif isinstance(node, ast.Import):
            for alias in node.names:
                yield node.lineno, alias.name, []


def _edges(found: dict[str, Module]) -> dict[str, set[str]]:
    edges: dict[str, set[str]] = {name: set() for name in found}
    for name, module in found.items():
        for _, imported, names in _imports(module):
            targets = [f"{imported}.{n}" for n in names if f"{imported}.{n}" in found]
            if len(targets) < len(names) or not names:
                targets.append(imported)
            edges[name].update(t for t in targets if t in found and t != name)
    return edges


def cycles(found: dict[str, Module] | None = None) -> list[list[str]]:
    """The strongly connected components of more than one module (Tarjan), each sorted."""
    edges = _edges(found if found is not None else modules())
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    components: list[list[str]] = []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        on_stack.add(node)
        for successor in sorted(edges[node]):
            if successor not in index:
                visit(successor)
                low[node] = min(low[node], low[successor])
            elif successor in on_stack:
                low[node] = min(low[node], index[successor])
        if low[node] == index[node]:
            component = []
            while True:
                member = stack.pop()
                on_stack.discard(member)
                component.append(member)
                if member == node:
                    break
            if len(component) > 1:
                components.append(sorted(component))

    sys.setrecursionlimit(max(sys.getrecursionlimit(), 10 * len(edges)))
    for node in sorted(edges):
        if node not in index:
            visit(node)
    return sorted(components)


def private_imports(found: dict[str, Module] | None = None) -> list[str]:
    """``file:line: module imports name`` for each private name imported from another module."""
    found = found if found is not None else modules()
    hits = []
    for name, module in found.items():
        for line, imported, names in _imports(module):
            if not imported.startswith("lowerkit.") or imported == name:
                continue
            for imported_name in names:
                if imported_name.startswith("_") and not imported_name.startswith(("_upstream", "__")):
                    hits.append(f"{_where(module)}:{line}: {name} imports {imported}.{imported_name}")
    return hits


def _where(module: Module) -> Path:
    return module.path.relative_to(REPO) if module.path.is_relative_to(REPO) else module.path


def facade_imports(found: dict[str, Module] | None = None) -> list[str]:
    """``file:line: module imports name`` for each name imported from a package's ``__init__``."""
    found = found if found is not None else modules()
    packages = {name for name, module in found.items() if module.path.name == "__init__.py"}
    hits: list[str] = []
    for name, module in found.items():
        if module.path.name == "__init__.py":
            continue
        for line, imported, names in _imports(module):
            if imported in packages:
                hits.extend(
                    f"{_where(module)}:{line}: {name} imports {imported}.{n} from the package facade"
                    for n in names
                    if f"{imported}.{n}" not in found
                )
    return hits


def main() -> int:
    """Print the cycles, the private imports and the facade imports; exit 1 when there is any."""
    found = modules()
    components = cycles(found)
    hits = private_imports(found)
    facade = facade_imports(found)
    print(
        f"{len(found)} modules; {sum(map(len, components))} in {len(components)} import cycles; "
        f"{len(hits)} private imports; {len(facade)} facade imports"
    )
    for component in components:
        print("cycle:", " <-> ".join(component))
    for hit in hits + facade:
        print(hit)
    return 1 if components or hits or facade else 0


if __name__ == "__main__":
    raise SystemExit(main())
