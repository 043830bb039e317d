"""GRAPH_MODULE_PASSES: ArmPassManager's graph-module pipelines (the Arm quantizer's
``transform_for_annotation``, control-flow submodules) run through the pass manager class a
scope names (lowerkit's `FastGraphModulePassManager` under ``accelerated_arm_quantization()``)."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from typing import Any

from executorch.backends.arm._passes import arm_pass_manager as arm_pass_manager_module
from torch.fx.passes.infra.pass_manager import PassManager

from lowerkit.arm_passes._upstream_arm_manager import built_for_thread
from lowerkit.pass_infra.accelerations.patching import Patch, Replacement

__all__ = ["GRAPH_MODULE_PASSES", "patched_graph_module_pass_manager"]


class _GraphModulePassManagerForThread(PassManager):
    """Stands in for the ``GraphModulePassManager`` (torch's ``PassManager``) that ArmPassManager's
    graph-module pipelines (``transform_for_annotation_pipeline``, control-flow submodules) build
    while GRAPH_MODULE_PASSES is installed: the class the calling thread's innermost scope
    asked for, or torch's own ``PassManager`` outside any scope."""

    def __new__(cls, *args: Any, **kwargs: Any) -> Any:
        return built_for_thread(GRAPH_MODULE_PASSES, PassManager, args, kwargs)


#: ArmPassManager's graph-module pipelines build the manager class a scope names.
GRAPH_MODULE_PASSES = Patch(
    "lowerkit.arm_passes._upstream_graph_module_passes",
    lambda: [
        Replacement(
            arm_pass_manager_module, "GraphModulePassManager", _GraphModulePassManagerForThread, dispatch=False
        )
    ],
)


@contextlib.contextmanager
def patched_graph_module_pass_manager(replacement: type) -> Iterator[None]:
    """Make ArmPassManager's graph-module pipelines (in this thread) run through `replacement`."""
    with GRAPH_MODULE_PASSES.scope(replacement):
        yield
