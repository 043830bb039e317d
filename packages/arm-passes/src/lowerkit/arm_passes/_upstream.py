"""Every reach into ExecuTorch's private Arm names lives here, so a version bump is one file to read.

Pinned against executorch 1.5.1 (``backends/arm/_passes``, ``backends/arm/tosa/backend.py``,
``backends/transforms/propagate_view_copy_permute_pass.py``, ``exir/pass_manager.py``).
"""

from __future__ import annotations

import contextlib
import copy
import threading
from collections.abc import Callable, Iterator
from typing import Any

import torch
from executorch.backends.arm import _passes as arm_passes_pkg  # private package
from executorch.backends.arm._passes.arm_pass import ArmPass as ArmPass
from executorch.backends.arm._passes.arm_pass_manager import ArmPassManager as ArmPassManager
from executorch.backends.arm._passes.fuse_duplicate_users_pass import (
    TOSA_EXCLUDED_TARGETS as TOSA_EXCLUDED_TARGETS,
)
from executorch.backends.arm._passes.propagate_view_copy_permute_pass import (
    PropagateViewCopyPermuteDownPass as PropagateViewCopyPermuteDownPass,
)
from executorch.backends.arm._passes.propagate_view_copy_permute_pass import (
    PropagateViewCopyPermuteUpPass as PropagateViewCopyPermuteUpPass,
)
from executorch.backends.arm._passes.remove_permutes_around_elementwise_tosa_ops import (
    RemovePermutesAroundElementwiseTosaOps as RemovePermutesAroundElementwiseTosaOps,
)
from executorch.backends.arm.ethosu.backend import EthosUBackend
from executorch.backends.arm.tosa.backend import TOSABackend
from executorch.exir._program_utils import _get_updated_graph_signature
from executorch.exir.dialects._ops import ops as exir_ops
from executorch.exir.dialects.edge._ops import EdgeOpOverload as EdgeOpOverload
from executorch.exir.pass_manager import ExportedProgramPassManager
from torch._ops import OpOverload as OpOverload
from torch._subclasses.fake_tensor import FakeTensor as FakeTensor
from torch.export import ExportedProgram
from torch.fx import GraphModule
from torch.fx.passes.infra.pass_base import PassResult
from torch.utils import _pytree as pytree

__all__ = [
    "TOSA_EXCLUDED_TARGETS",
    "ArmPass",
    "ArmPassManager",
    "EdgeOpOverload",
    "FakeTensor",
    "OpOverload",
    "PropagateViewCopyPermuteDownPass",
    "PropagateViewCopyPermuteUpPass",
    "RemovePermutesAroundElementwiseTosaOps",
    "build_pass_list",
    "capture_backend_inputs",
    "capture_tosa_flatbuffers",
    "check_program",
    "enable_python_dispatcher",
    "ethosu_backend_id",
    "exir_ops",
    "fake_mode_of",
    "patched_arm_pass_manager",
    "pytree",
    "set_program_graph",
    "shallow_program_copy",
    "tosa_context",
    "update_after_graph_pass",
]

#: The module attribute TOSABackend._preprocess_module imports lazily on every call.
_PASS_MANAGER_HOME = arm_passes_pkg
_PATCH_LOCK = threading.RLock()


class _ListingPassManager(ArmPassManager):
    """An ArmPassManager that builds its pipeline and hands back the passes instead of running them."""

    def _transform(self, exported_program: ExportedProgram, graph_module: GraphModule) -> Any:
        return list(self.passes)


def build_pass_list(
    compile_spec: Any, exported_program: ExportedProgram
) -> list[Callable[[GraphModule], PassResult | None]]:
    """The exact pass instances ArmPassManager.transform_to_backend_pipeline would run, in order."""
    manager = _ListingPassManager(compile_spec)
    passes = manager.transform_to_backend_pipeline(
        exported_program=exported_program, graph_module=exported_program.graph_module
    )
    return list(passes)


def check_program(exported_program: ExportedProgram) -> None:
    """ExportedProgramPassManager.check: recompile, lint, no call_method, validate."""
    ExportedProgramPassManager.check(None, exported_program)


def set_program_graph(target: ExportedProgram, source: ExportedProgram) -> None:
    """Copy graph module, signature and range constraints as ArmPassManager._transform does."""
    target._graph_module = source.graph_module
    target._graph_signature = source.graph_signature
    target._range_constraints = source.range_constraints


def update_after_graph_pass(exported_program: ExportedProgram, graph_module: GraphModule) -> None:
    """What _ExportedProgramGraphPassAdapter + ExportedProgramPassManager do after a modifying pass.

    The adapter recompiles and updates the signature; the manager then recompiles again, which
    regenerates the same code, so one recompile is kept.
    """
    graph_module.recompile()
    exported_program._graph_module = graph_module
    exported_program._graph_signature = _get_updated_graph_signature(
        exported_program.graph_signature, graph_module
    )


def shallow_program_copy(exported_program: ExportedProgram) -> ExportedProgram:
    """The shallow copy ExportedProgramPassManager works on."""
    return copy.copy(exported_program)


@contextlib.contextmanager
def patched_arm_pass_manager(replacement: type) -> Iterator[None]:
    """Make TOSABackend's preprocess build `replacement` instead of ArmPassManager, restoring on exit."""
    with _PATCH_LOCK:
        previous = _PASS_MANAGER_HOME.ArmPassManager
        _PASS_MANAGER_HOME.ArmPassManager = replacement
        try:
            yield
        finally:
            _PASS_MANAGER_HOME.ArmPassManager = previous


@contextlib.contextmanager
def capture_tosa_flatbuffers(sink: list[bytes]) -> Iterator[None]:
    """Append every TOSA flatbuffer TOSABackend produces (also inside EthosUBackend) to `sink`."""

    def recording(edge_program: ExportedProgram, compile_spec: Any, inner: Any) -> Any:
        result = inner(edge_program, compile_spec)
        sink.append(bytes(result.processed_bytes))
        return result

    with _preprocess_wrapped(recording):
        yield


@contextlib.contextmanager
def capture_backend_inputs(sink: list[tuple[ExportedProgram, Any]]) -> Iterator[None]:
    """Record a deep copy of each (edge program, TOSA compile spec) TOSABackend preprocesses."""

    def recording(edge_program: ExportedProgram, compile_spec: Any, inner: Any) -> Any:
        sink.append((copy.deepcopy(edge_program), compile_spec))
        return inner(edge_program, compile_spec)

    with _preprocess_wrapped(recording):
        yield


@contextlib.contextmanager
def _preprocess_wrapped(wrapper: Any) -> Iterator[None]:
    """Route TOSABackend._preprocess through `wrapper(edge_program, compile_spec, inner)` meanwhile."""
    original = TOSABackend.__dict__["_preprocess"]
    inner = original.__func__

    def wrapped(edge_program: ExportedProgram, compile_spec: Any) -> Any:
        return wrapper(edge_program, compile_spec, inner)

    with _PATCH_LOCK:
        TOSABackend._preprocess = staticmethod(wrapped)
        try:
            yield
        finally:
            TOSABackend._preprocess = original


def ethosu_backend_id() -> str:
    """The backend id the Ethos-U delegate registers under."""
    return EthosUBackend.__name__


def fake_mode_of(graph_module: GraphModule) -> Any:
    """The FakeTensorMode the graph's placeholder values belong to, or None."""
    for node in graph_module.graph.nodes:
        if node.op != "placeholder":
            continue
        val = node.meta.get("val")
        mode = getattr(val, "fake_mode", None)
        if mode is not None:
            return mode
    return None


def enable_python_dispatcher() -> Any:
    """torch._C's python dispatcher context, as ExportPass uses when replaying with a fake mode."""
    return torch._dispatch.python.enable_python_dispatcher()


def tosa_context(compile_spec: Any, graph_module: GraphModule) -> Any:
    """The TosaLoweringContext ArmPassManager runs its pipeline in."""
    return ArmPassManager(compile_spec)._tosa_context(graph_module)
