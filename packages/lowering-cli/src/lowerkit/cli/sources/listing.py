"""`lowerkit models`: what each source can build here (no torch import unless --check)."""

from __future__ import annotations

from typing import Any

from lowerkit.cli.cache.key import distribution_version
from lowerkit.cli.errors import UsageError
from lowerkit.cli.sources import et
from lowerkit.cli.sources.options import TASKS

#: Packages installed here that may still fail to import (compiled ops built for another torch).
UNCHECKED = frozenset({"torchvision", "timm"})


def rows(*, check: bool) -> list[dict[str, Any]]:
    """One row per name (zoo, et, tv with `check`) and one for hf:DIR; `buildable` None: not checked."""
    from lowerkit.zoo import catalogue

    found: list[dict[str, Any]] = [
        {"model": f"zoo:{m.name}", "source": "zoo", "buildable": True, "weights": "seeded (built in)", "status": m.description}
        for m in catalogue.ENTRIES
    ]
    imports = _imports() if check else {}
    for entry in et.catalogue():
        status = et.status(entry)
        buildable: bool | None = not status.startswith("not buildable")
        broken = [name for name in entry.requires if imports.get(name)]
        if buildable and broken:
            status, buildable = f"not buildable here: {imports[broken[0]]}", False
        elif buildable and not check and set(entry.requires) & UNCHECKED:
            status, buildable = f"{status}; needs {', '.join(sorted(set(entry.requires) & UNCHECKED))} ('lowerkit models --check' tries it)", None
        found.append({
            "model": f"et:{entry.name}", "source": "et", "buildable": buildable,
            "weights": {"untrained": "untrained", "random": "--random-weights", "hub": "--random-weights or --weights FILE"}.get(entry.kind, "-"),
            "status": status,
        })
    version = distribution_version("torchvision")
    if check and imports.get("torchvision") is None and version != "absent":
        from lowerkit.cli.sources import tv

        found += [
            {"model": f"tv:{name}", "source": "tv", "buildable": True, "weights": "untrained unless --weights FILE", "status": "torchvision classification"}
            for name in tv.names()
        ]
    else:
        state = imports.get("torchvision") or (
            "torchvision is not installed" if version == "absent" else f"torchvision {version} installed; 'lowerkit models --check' tries it"
        )
        found.append({"model": "tv:NAME", "source": "tv", "buildable": None if not check and version != "absent" else False,
                      "weights": "untrained unless --weights FILE", "status": state})
    transformers = distribution_version("transformers")
    found.append({
        "model": "hf:DIR", "source": "hf", "buildable": transformers != "absent",
        "weights": "the folder's *.safetensors (random, with a warning, when it has none) or --weights FILE",
        "status": f"a save_pretrained folder; tasks {', '.join(TASKS)}; transformers {transformers}",
    })
    from lowerkit.cli.sources import hf_llm

    found += [
        {"model": f"hf:DIR ({model_type})", "source": "hf", "buildable": transformers != "absent",
         "weights": "the folder's *.safetensors, converted by ExecuTorch's converter",
         "status": f"--task {hf_llm.TASK}: {family.title} (ExecuTorch's LLM export: KV cache, runner metadata; "
                   f"--prefill: {'no' if family.no_prefill_decode else 'Core ML'})"}
        for model_type, family in hf_llm.FAMILIES.items()
    ]  # fmt: skip
    return found


def _imports() -> dict[str, str | None]:
    """torchvision's and timm's import error here, None when they import."""
    from lowerkit.cli.sources import tv

    errors: dict[str, str | None] = {}
    for name, attempt in (("torchvision", tv.import_torchvision), ("timm", tv.import_timm)):
        try:
            attempt(name)
            errors[name] = None
        except UsageError as error:
            errors[name] = str(error).partition(": ")[2]
    return errors


def render(found: list[dict[str, Any]]) -> list[str]:
    """The terminal view: buildable models first per source, then what cannot build and why."""
    lines = []
    for source, title in (("zoo", "lowerkit's zoo"), ("et", "ExecuTorch's example registry"), ("tv", "torchvision"), ("hf", "Hugging Face folders")):
        mine = [row for row in found if row["source"] == source]
        ready = sum(1 for row in mine if row["buildable"])
        unknown = sum(1 for row in mine if row["buildable"] is None)
        counted = f"{title}: {ready} of {len(mine)} build here" + (f", {unknown} unchecked" if unknown else "")
        lines.append(counted if source != "hf" else f"{title}:")
        for row in sorted(mine, key=lambda row: {True: 0, None: 1, False: 2}[row["buildable"]]):
            mark = {True: "yes", None: "?", False: "no"}[row["buildable"]]
            lines.append(f"  {row['model']:<26} {mark:<4} {row['status']}")
    return lines
