"""--keep-float LAYER: check the names against the model's modules before any work."""

from __future__ import annotations

from collections.abc import Sequence

from lowerkit.cli.errors import UsageError
from lowerkit.cli.options import Target
from lowerkit.cli.sources.model import ModelSource
from lowerkit.cli.targets import describe
from lowerkit.pass_infra.helpers.suggest import did_you_mean


def module_names(source: ModelSource) -> list[str]:
    """The model's module names (e.g. "features.3.0"), as `--keep-float` takes them."""
    if source.module is not None:
        return [name for name, _ in source.module.named_modules() if name]
    names: set[str] = set()
    for node in source.export().graph.nodes:
        for path in (node.meta.get("nn_module_stack") or {}).values():
            name = str(path[0] if isinstance(path, tuple) else path)
            if name:
                names.add(name)
    return sorted(names)


def check(names: Sequence[str], source: ModelSource, target: Target) -> tuple[str, ...]:
    """The names, checked: a UsageError for a target that does not quantize or an unknown name."""
    if not names:
        return ()
    if not target.calibrates:
        quantizing = describe(lambda t: t.calibrates)
        raise UsageError(f"--keep-float applies to quantizing targets ({quantizing}), not '{target.name}'")
    known = module_names(source)
    for name in names:
        if name not in known:
            hint = did_you_mean(name, known, n=3) or f" It has {len(known)} modules; see them with 'lowerkit debug'."
            raise UsageError(f"--keep-float: {source.name} has no module '{name}'.{hint}")
    return tuple(dict.fromkeys(names))
