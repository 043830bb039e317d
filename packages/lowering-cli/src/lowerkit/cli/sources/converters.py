"""ExecuTorch's own Hugging Face weight converters (``executorch.examples.models.<family>.convert_weights``).

The Qwen 2.5 and Phi-4-mini converters import torchtune at the top of their module, for names
their Hugging Face path does not need from it: ``get_mapped_key`` (ExecuTorch defines the same
function in ``executorch.examples.models.checkpoint``) and ``FullModelHFCheckpointer`` (used only
for torchtune-format checkpoints). torchtune is not among ExecuTorch's requirements, and its last
release (0.6.1) does not import with torchao 0.18 (``torchao.dtypes.nf4tensor`` is gone), so stock
cannot import these converters at all. Where torchtune does not import, `converter` imports the
module with stand-ins for exactly those names: ExecuTorch's ``get_mapped_key``, and a
``FullModelHFCheckpointer`` that refuses. The stand-ins are in ``sys.modules`` only during that
import, and only for converter sources lowerkit was proven on (`PROVEN_SOURCES`).
"""

from __future__ import annotations

import contextlib
import hashlib
import importlib
import importlib.util
import types
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

from lowerkit.cli.errors import UsageError

__all__ = ["PROVEN_SOURCES", "converter", "source_hash"]

#: SHA-256 (first 16 hex digits) of each converter module that needs the torchtune stand-ins,
#: as ExecuTorch 1.5.1 ships it.
PROVEN_SOURCES = {
    "executorch.examples.models.qwen2_5.convert_weights": "4e301188038b5973",
    "executorch.examples.models.phi_4_mini.convert_weights": "60b9e6248302612d",
}


def source_hash(module: str) -> str:
    """The first 16 hex digits of the SHA-256 of `module`'s source file, found without importing its package."""
    package, _, name = module.rpartition(".")
    parent, _, folder = package.rpartition(".")
    spec = importlib.util.find_spec(parent)
    locations = list(spec.submodule_search_locations or ()) if spec is not None else []
    path = next((Path(p) / folder / f"{name}.py" for p in locations if (Path(p) / folder / f"{name}.py").is_file()), None)
    if path is None:
        raise UsageError(f"ExecuTorch's weight converter {module} is not installed")
    return hashlib.sha256(path.read_bytes()).hexdigest()[:16]


def converter(module: str, function: str) -> Callable[[dict[str, Any]], dict[str, Any]]:
    """ExecuTorch's `module`.`function` (a Hugging Face state dict -> Meta's), imported as above."""
    try:
        loaded = importlib.import_module(module)
    except ImportError as error:
        if not (error.name or "").startswith("torchtune"):
            raise
        if source_hash(module) != PROVEN_SOURCES.get(module):
            raise UsageError(
                f"{module} needs torchtune, which does not import here ({error}); lowerkit imports it without "
                "torchtune only for the sources it was proven on (ExecuTorch 1.5.1)"
            ) from None
        with _torchtune_stand_ins():
            loaded = importlib.import_module(module)
    found: Callable[[dict[str, Any]], dict[str, Any]] = getattr(loaded, function)
    return found


class _NoCheckpointer:
    """``FullModelHFCheckpointer``'s stand-in: lowerkit converts Hugging Face folders without it."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        raise UsageError("converting a torchtune-format checkpoint needs torchtune, which does not import here")


@contextlib.contextmanager
def _torchtune_stand_ins() -> Iterator[None]:
    from executorch.examples.models.checkpoint import get_mapped_key

    from lowerkit.pass_infra.helpers.stand_ins import modules_standing_in

    names = ("torchtune", "torchtune.models", "torchtune.models.convert_weights", "torchtune.training")
    modules = {name: types.ModuleType(name) for name in names}
    modules["torchtune.models.convert_weights"].get_mapped_key = get_mapped_key  # type: ignore[attr-defined]
    modules["torchtune.training"].FullModelHFCheckpointer = _NoCheckpointer  # type: ignore[attr-defined]
    with modules_standing_in(modules):
        yield
