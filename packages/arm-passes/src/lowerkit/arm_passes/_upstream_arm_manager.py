"""ARM_MANAGER: ExecuTorch's TOSABackend builds the pass manager class a scope names (lowerkit's
`FastArmPassManager` under ``accelerated_arm_pipeline()``) instead of ``ArmPassManager``."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from typing import Any

from executorch.backends.arm import _passes as arm_passes_pkg  # private package
from executorch.backends.arm._passes.arm_pass_manager import ArmPassManager

from lowerkit.pass_infra.accelerations.patching import Patch, Replacement

__all__ = ["ARM_MANAGER", "built_for_thread", "patched_arm_pass_manager"]

#: The module attribute TOSABackend._preprocess_module imports lazily on every call.
_PASS_MANAGER_HOME = arm_passes_pkg


def built_for_thread(patch: Patch, stock: type, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
    """An instance of the class the calling thread's innermost `patch` scope names, else of `stock`.

    Not an instance of the stand-in class whose ``__new__`` returns it, so ``type.__call__``
    does not ``__init__`` it again.
    """
    chosen: Any = patch.options() or stock
    instance = chosen.__new__(chosen)
    instance.__init__(*args, **kwargs)
    return instance


class _ArmPassManagerForThread(ArmPassManager):
    """Stands in for ``ArmPassManager`` in ``executorch.backends.arm._passes`` while ARM_MANAGER is installed.

    Constructing it builds the manager class the calling thread's innermost scope asked for,
    or a stock ``ArmPassManager`` for a thread outside any scope (so it is neutral for them).
    """

    def __new__(cls, *args: Any, **kwargs: Any) -> Any:
        return built_for_thread(ARM_MANAGER, ArmPassManager, args, kwargs)


#: TOSABackend's preprocess builds the manager class a scope names instead of ArmPassManager.
ARM_MANAGER = Patch(
    "lowerkit.arm_passes._upstream_arm_manager",
    lambda: [
        Replacement(_PASS_MANAGER_HOME, "ArmPassManager", _ArmPassManagerForThread, dispatch=False)
    ],
)


@contextlib.contextmanager
def patched_arm_pass_manager(replacement: type) -> Iterator[None]:
    """Make TOSABackend's preprocess (in this thread) build `replacement` instead of ArmPassManager."""
    with ARM_MANAGER.scope(replacement):
        yield
