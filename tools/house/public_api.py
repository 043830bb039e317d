"""The house rule on public APIs, checked statically over every package's ``__init__``.

A package's public API is its ``__init__.py``'s ``__all__``: each name listed once, one a line,
with a one-line doc as the line's comment. An eager facade writes ``__all__`` as a list; a lazy
one (``lowerkit.pass_infra.helpers.lazy_exports``) lists its names as the imports under
``if TYPE_CHECKING:``, and ``__all__`` is derived from them.

``python -m house.public_api`` (from ``tools/``) prints every name that breaks it.
"""

from __future__ import annotations

import ast
import io
import tokenize

from house.imports import REPO, Module, modules

__all__ = ["public_names", "undocumented"]


def _lazy_names(tree: ast.Module) -> list[tuple[str, int]]:
    return [
        (alias.asname or alias.name, alias.lineno)
        for node in tree.body
        if isinstance(node, ast.If) and isinstance(node.test, ast.Name) and node.test.id == "TYPE_CHECKING"
        for statement in node.body
        if isinstance(statement, ast.ImportFrom)
        for alias in statement.names
    ]


def _listed_names(tree: ast.Module) -> list[tuple[str, int]]:
    for node in tree.body:
        if (
            isinstance(node, ast.Assign)
            and any(isinstance(t, ast.Name) and t.id == "__all__" for t in node.targets)
            and isinstance(node.value, ast.List | ast.Tuple)
        ):
            return [(e.value, e.lineno) for e in node.value.elts if isinstance(e, ast.Constant) and isinstance(e.value, str)]
    return []


def public_names(module: Module) -> list[tuple[str, int]]:
    """(name, line) of each public name a package ``__init__`` lists."""
    source = module.path.read_text()
    tree = ast.parse(source, str(module.path))
    return _lazy_names(tree) if "lazy_exports(" in source else _listed_names(tree)


def undocumented(found: dict[str, Module] | None = None) -> list[str]:
    """``file:line: problem`` for each top-level package whose public names break the rule."""
    found = found if found is not None else modules()
    hits: list[str] = []
    for name, module in sorted(found.items()):
        if module.path.name != "__init__.py" or name.count(".") != 1:
            continue
        where = module.path.relative_to(REPO) if module.path.is_relative_to(REPO) else module.path
        names = public_names(module)
        if not names:
            hits.append(f"{where}: {name} lists no public names (__all__)")
        comments = {
            token.start[0]
            for token in tokenize.generate_tokens(io.StringIO(module.path.read_text()).readline)
            if token.type == tokenize.COMMENT
        }
        lines = [line for _, line in names]
        seen: set[str] = set()
        for public, line in names:
            if public in seen:
                hits.append(f"{where}:{line}: {public} is listed twice")
            seen.add(public)
            if line not in comments or lines.count(line) > 1:
                hits.append(f"{where}:{line}: {public} needs its own line with a one-line doc comment")
    return hits


def main() -> int:
    """Print the names that break the rule; exit 1 when there is any."""
    hits = undocumented()
    print(f"{len(hits)} public names without their one-line doc")
    for hit in hits:
        print(hit)
    return 1 if hits else 0


if __name__ == "__main__":
    raise SystemExit(main())
