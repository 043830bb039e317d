"""The table of accelerations: each `Patch`, the scopes that hold it, the stage it serves, and the
upstream names it replaces (read from the patch itself, so the table cannot drift from the code).

`ACCELERATIONS` lists pass-infra's patches; arm-passes and coreml-preprocess list theirs in their
own ``accelerations`` module, and ``lowerkit accelerations`` prints the three (also generated into
docs/architecture.md). Each package's source-hash test checks that every replaced upstream
function is guarded (`guard_name`).
"""

from __future__ import annotations

import importlib
import inspect
import pkgutil
from collections.abc import Collection, Iterable, Mapping
from dataclasses import dataclass, field
from types import ModuleType
from typing import Any

from lowerkit.pass_infra.accelerations.attribute_names import FRESH_ATTRIBUTE_NAMES
from lowerkit.pass_infra.accelerations.cheaper_replay import CHEAP_REPLAY
from lowerkit.pass_infra.accelerations.cia_scan import CIA_SCAN
from lowerkit.pass_infra.accelerations.compiled_code import COMPILED_CODE
from lowerkit.pass_infra.accelerations.dead_code import DEAD_CODE
from lowerkit.pass_infra.accelerations.deferred_export import DEFERRED_EXPORT
from lowerkit.pass_infra.accelerations.deferred_lowering import DEFERRED_LOWERING
from lowerkit.pass_infra.accelerations.deferred_recompile import DEFERRED_RECOMPILE
from lowerkit.pass_infra.accelerations.export_guards import EXPORT_GUARDS
from lowerkit.pass_infra.accelerations.fake_cache import FAKE_CACHE
from lowerkit.pass_infra.accelerations.histogram_search import HISTOGRAM_SEARCH
from lowerkit.pass_infra.accelerations.lazy_copies import LAZY_COPIES
from lowerkit.pass_infra.accelerations.lifted_constants import LIFTED_CONSTANTS
from lowerkit.pass_infra.accelerations.partition_reachability import PARTITION_REACHABILITY
from lowerkit.pass_infra.accelerations.patching import Patch, Replacement, all_patches
from lowerkit.pass_infra.accelerations.pattern_skip import PATTERN_SKIP
from lowerkit.pass_infra.accelerations.reexport import REEXPORT
from lowerkit.pass_infra.accelerations.retrace_skip import RETRACE_SKIP
from lowerkit.pass_infra.accelerations.settled_heap import SETTLED_HEAP
from lowerkit.pass_infra.accelerations.shared_provenance import SHARED_PROVENANCE
from lowerkit.pass_infra.accelerations.signature_lookups import SIGNATURE_LOOKUPS
from lowerkit.pass_infra.accelerations.verified_graphs import VERIFIED_GRAPHS

__all__ = [
    "ACCELERATIONS",
    "Acceleration",
    "audit",
    "guard_name",
    "markdown",
    "patches_defined_in",
    "unguarded",
    "upstream_name",
]


@dataclass(frozen=True)
class Acceleration:
    """One row: `patch`, opened by `scopes` (entry points and scopes), during `stage`.

    `hooks` says what the patch does at install besides its replacements (when it does);
    `guarded_by` names, for a replaced value that is no function (a module bound in upstream's
    namespace), the upstream function whose source hash guards its use instead."""

    patch: Patch
    scopes: tuple[str, ...]
    stage: str
    hooks: str = ""
    guarded_by: Mapping[str, str] = field(default_factory=dict)

    def replaced(self) -> tuple[str, ...]:
        """The upstream attributes a scope replaces, as ``module:Owner.name``."""
        return tuple(upstream_name(r) for r in self.patch.replacements())


def upstream_name(replacement: Replacement) -> str:
    """``module:Owner.name`` (a class attribute) or ``module:name`` (a module attribute)."""
    owner = replacement.owner
    if isinstance(owner, ModuleType):
        return f"{owner.__name__}:{replacement.name}"
    return f"{owner.__module__}:{owner.__qualname__}.{replacement.name}"


def _defined_at(value: Any) -> str | None:
    value = inspect.unwrap(value)
    if isinstance(value, property) and value.fget is not None:
        fget = inspect.unwrap(value.fget)
        return f"{fget.__module__}:{fget.__qualname__}.fget"
    if inspect.isfunction(value) or inspect.isclass(value):
        return f"{value.__module__}:{value.__qualname__}"
    return None


def guard_name(replacement: Replacement) -> str:
    """The upstream source whose hash guards `replacement` (call it outside any scope of its patch):
    the replaced function, staticmethod, property getter or class where it is defined (re-exports
    resolved), else the owner (an attribute the owner does not define, or a plain value)."""
    owner, name = replacement.owner, replacement.name
    if isinstance(owner, ModuleType):
        value = getattr(owner, name, None)
    else:
        value = vars(owner).get(name)
    if isinstance(value, staticmethod | classmethod):
        value = value.__func__
    found = _defined_at(value) if value is not None else None
    if found is not None:
        return found
    return owner.__name__ if isinstance(owner, ModuleType) else f"{owner.__module__}:{owner.__qualname__}"


def unguarded(rows: Iterable[Acceleration], hashed: Collection[str]) -> list[str]:
    """``patch: guard name`` for each replacement of `rows` whose `guard_name` is not in `hashed`."""
    missing = []
    for row in rows:
        for r in row.patch.replacements():
            guard = row.guarded_by.get(upstream_name(r)) or guard_name(r)
            if guard not in hashed:
                missing.append(f"{row.patch.name}: {guard}")
    return missing


def patches_defined_in(package: str) -> list[Patch]:
    """Every Patch a module of `package` (a package or one module) makes; each is imported here."""
    root = importlib.import_module(package)
    for info in pkgutil.walk_packages(getattr(root, "__path__", []), f"{package}."):
        if not info.name.endswith(".__main__"):
            importlib.import_module(info.name)
    return [p for p in all_patches() if p.module == package or p.module.startswith(f"{package}.")]


def audit(package: str, rows: Collection[Acceleration], hashed: Collection[str]) -> list[str]:
    """What is wrong with `package`'s table `rows`, one line each: a patch the package makes and does
    not list (or lists twice, or does not make), a patch not named after the module that makes it,
    a replaced upstream function whose source hash is not in `hashed`."""
    made = patches_defined_in(package)
    listed = [row.patch for row in rows]
    problems = [f"{p.name}: not in the table" for p in made if all(p is not q for q in listed)]
    problems += [f"{p.name}: listed {listed.count(p)} times" for p in made if listed.count(p) > 1]
    problems += [f"{p.name}: in the table, not made by {package}" for p in listed if all(p is not q for q in made)]
    problems += [f"{p.name}: made by {p.module}, named otherwise" for p in made if p.name != p.module]
    return problems + [f"{line}: no source hash" for line in unguarded(rows, hashed)]


def markdown(rows: Iterable[Acceleration]) -> str:
    """The rows as a Markdown table (patch, scopes, stage, upstream names replaced)."""
    lines = ["| patch | held by | stage | replaces |", "|---|---|---|---|"]
    for row in rows:
        replaced = [f"`{name}`" for name in row.replaced()]
        if row.hooks:
            replaced.append(row.hooks)
        scopes = ", ".join(f"`{scope}`" for scope in row.scopes)
        lines.append(f"| `{row.patch.name}` | {scopes} | {row.stage} | {'<br>'.join(replaced)} |")
    return "\n".join(lines) + "\n"


_LOWERING = "accelerated_lowering()"
_QUANTIZATION = "accelerated_quantization()"

#: pass-infra's patches, in the order a lowering meets them.
ACCELERATIONS: tuple[Acceleration, ...] = (
    Acceleration(DEFERRED_EXPORT, (_LOWERING, _QUANTIZATION), "`torch.export.export`: code generated once"),
    Acceleration(
        EXPORT_GUARDS, (_LOWERING, _QUANTIZATION), "strict `torch.export.export`: the discarded guard function"
    ),
    Acceleration(
        REEXPORT,
        ("accelerated_coreml_llm_export()",),
        "`export_llama`'s builder: the strict re-export of its unchanged `.module()`",
        "the modules remembered dropped at removal",
    ),
    Acceleration(
        FRESH_ATTRIBUTE_NAMES, (_QUANTIZATION,), "`prepare_pt2e` / `convert_pt2e`: observer and qparam names"
    ),
    Acceleration(
        DEFERRED_RECOMPILE, (_QUANTIZATION,), "torch `PassManager` calls (a quantizer's `transform_for_annotation`)"
    ),
    Acceleration(HISTOGRAM_SEARCH, (_QUANTIZATION,), "calibration, `convert_pt2e`: `HistogramObserver`'s search"),
    Acceleration(
        CHEAP_REPLAY,
        ("cheaper_replay()", _LOWERING, _QUANTIZATION, "PassPipeline"),
        "every `ExportPass` replay (edge, backend and quantizer passes)",
    ),
    Acceleration(
        FAKE_CACHE,
        ("faketensor_cache()", _LOWERING, _QUANTIZATION, "PassPipeline"),
        "FakeTensor dispatch of ExecuTorch's op namespaces",
        "FakeTensor's negative cache entries set aside",
    ),
    Acceleration(
        RETRACE_SKIP, (_LOWERING,), "`run_decompositions` (`to_edge`, `to_edge_transform_and_lower`)"
    ),
    Acceleration(LAZY_COPIES, ("local_decomposition (under RETRACE_SKIP)",), "`run_decompositions`: the program copy"),
    Acceleration(CIA_SCAN, (_LOWERING,), "`run_decompositions`: decomposition tables"),
    Acceleration(SHARED_PROVENANCE, (_LOWERING, _QUANTIZATION), "every re-trace (torch.fx `Interpreter`)"),
    Acceleration(VERIFIED_GRAPHS, (_LOWERING,), "the edge verifier's dtype check"),
    Acceleration(PATTERN_SKIP, (_LOWERING,), "backend pattern passes (XNNPACK's SDPA, bilinear upsample)"),
    Acceleration(PARTITION_REACHABILITY, (_LOWERING,), "partitioning (`CapabilityBasedPartitioner`)"),
    Acceleration(
        DEAD_CODE, (_LOWERING, _QUANTIZATION), "`Graph.eliminate_dead_code` (backend, edge and quantizer passes)"
    ),
    Acceleration(
        DEFERRED_LOWERING,
        (_LOWERING,),
        "`to_edge_transform_and_lower`'s two halves: code generated only for the programs handed back",
        guarded_by={
            "executorch.exir.program._program:EdgeProgramManager.to_backend": "lowerkit.pass_infra._upstream:edge_to_backend_body"
        },
    ),
    Acceleration(
        LIFTED_CONSTANTS,
        (_LOWERING,),
        "`to_edge`'s constant lift: the calls it re-points keep their vouched values (delegate calls reuse theirs)",
    ),
    Acceleration(COMPILED_CODE, (_LOWERING, _QUANTIZATION), "graph module recompiles"),
    Acceleration(
        SETTLED_HEAP,
        ("settled_heap()", _LOWERING, _QUANTIZATION),
        "garbage collection, the whole block",
        "`gc.freeze()` at install, `gc.unfreeze()` at removal",
    ),
    Acceleration(
        SIGNATURE_LOOKUPS,
        ("cached_signature_lookups()", "accelerated_arm_pipeline()"),
        "the graph signature's input lookups (Arm passes, TOSA serialization)",
    ),
)
