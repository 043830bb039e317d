"""Every reach into ExecuTorch's private Arm names lives here, so a version bump is one file to read.

Pinned against executorch 1.5.1 (``backends/arm/_passes``, ``backends/arm/tosa/backend.py``,
``backends/transforms/propagate_view_copy_permute_pass.py``, ``exir/pass_manager.py``); see
``lowerkit.arm_passes.versions.PROVEN_ON``. Besides the names below, lowerkit subclasses
override these private upstream methods (their sources are hashed in
``tests/arm_passes_tests/test_upstream_sources.py``): ``ArmPassManager._transform``
(runner.FastArmPassManager) and ``PropagateViewCopyPermute{Up,Down}Pass._retrace``
(incremental).

The patches are `lowerkit.pass_infra.Patch`es, one per module beside this one
(`_upstream_arm_manager`, `_upstream_graph_module_passes`, `_upstream_tosa_preprocess`):
installed while a scope is open, dispatching per thread (threads outside a scope get stock
ExecuTorch), restored exactly by the last scope out.
"""

from __future__ import annotations

import contextlib
import copy
from collections.abc import Callable, Iterator
from typing import Any

import torch
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
from executorch.backends.arm.vgf import backend as vgf_backend
from executorch.backends.transforms.replace_scalar_with_tensor import ReplaceScalarWithTensorArgPass
from executorch.exir._program_utils import _get_updated_graph_signature
from executorch.exir.dialects._ops import ops as exir_ops
from executorch.exir.dialects.edge._ops import EdgeOpOverload as EdgeOpOverload
from executorch.exir.pass_manager import ExportedProgramPassManager
from torch._ops import HigherOrderOperator as HigherOrderOperator
from torch._ops import OpOverload as OpOverload
from torch._subclasses.fake_tensor import FakeTensor as FakeTensor
from torch.export import ExportedProgram
from torch.fx import GraphModule
from torch.fx.passes.infra.pass_base import PassResult
from torch.fx.passes.infra.pass_manager import PassManager
from torch.utils import _pytree as pytree

from lowerkit.arm_passes._upstream_graph_module_passes import patched_graph_module_pass_manager
from lowerkit.arm_passes._upstream_tosa_preprocess import wrapped_preprocess

__all__ = [
    "TOSA_EXCLUDED_TARGETS",
    "ArmPass",
    "ArmPassManager",
    "EdgeOpOverload",
    "FakeTensor",
    "HigherOrderOperator",
    "OpOverload",
    "PropagateViewCopyPermuteDownPass",
    "PropagateViewCopyPermuteUpPass",
    "RemovePermutesAroundElementwiseTosaOps",
    "build_pass_list",
    "build_tfa_pass_list",
    "capture_backend_inputs",
    "capture_tosa_flatbuffers",
    "capture_tosa_graphs",
    "capture_tosa_programs",
    "check_program",
    "disable_fake_mode_checks",
    "enable_python_dispatcher",
    "ethosu_backend_id",
    "exir_ops",
    "fake_mode_of",
    "is_int48",
    "permute_targets",
    "pytree",
    "rescale_multipliers",
    "set_program_graph",
    "shallow_program_copy",
    "tosa_context",
    "update_after_graph_pass",
    "vgf_pass_insertions",
]



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


@contextlib.contextmanager
def vgf_pass_insertions() -> Iterator[None]:
    """Within the block ArmPassManager inserts the VGF-only passes, as ``VgfBackend.preprocess`` arranges.

    Upstream registers them (``_register_vgf_rewrite_passes``) in a process-wide table around
    its own TOSA preprocess and puts the table back after; this does the same, with its helpers.
    """
    snapshot = vgf_backend._snapshot_registered_pass_insertions()
    try:
        vgf_backend._register_vgf_rewrite_passes()
        yield
    finally:
        vgf_backend._restore_registered_pass_insertions(snapshot)


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


def build_tfa_pass_list(compile_spec: Any, graph_module: GraphModule) -> list[Any]:
    """The exact pass instances ``ArmPassManager.transform_for_annotation_pipeline`` would run, in order."""
    listed: list[Any] = []

    class _Listing(PassManager):
        def __call__(self, module: Any) -> PassResult:
            listed.extend(self.passes)
            return PassResult(module, False)

    with patched_graph_module_pass_manager(_Listing):
        ArmPassManager(compile_spec).transform_for_annotation_pipeline(graph_module)
    return listed


@contextlib.contextmanager
def capture_tosa_flatbuffers(sink: list[bytes]) -> Iterator[None]:
    """Append every TOSA flatbuffer TOSABackend produces (also inside EthosUBackend) to `sink`."""

    def recording(edge_program: ExportedProgram, compile_spec: Any, inner: Any) -> Any:
        result = inner(edge_program, compile_spec)
        sink.append(bytes(result.processed_bytes))
        return result

    with wrapped_preprocess(recording):
        yield


@contextlib.contextmanager
def capture_backend_inputs(sink: list[tuple[ExportedProgram, Any]]) -> Iterator[None]:
    """Record a deep copy of each (edge program, TOSA compile spec) TOSABackend preprocesses."""

    def recording(edge_program: ExportedProgram, compile_spec: Any, inner: Any) -> Any:
        sink.append((copy.deepcopy(edge_program), compile_spec))
        return inner(edge_program, compile_spec)

    with wrapped_preprocess(recording):
        yield


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


def rescale_multipliers(scales: list[float], width: int = 32) -> tuple[list[int], list[int]]:
    """The (multiplier, right shift) pairs TOSA's RESCALE serializer writes for `scales`
    (`width`-bit multipliers: 16 for an int48 input, else 32)."""
    from executorch.backends.arm.operators.op_tosa_rescale import _compute_multiplier_and_shift

    return _compute_multiplier_and_shift(scales, width)


def is_int48(node: Any) -> bool:
    """Whether the TOSA serializer types `node`'s tensor INT48 (its TosaSpecialDtype meta)."""
    from executorch.backends.arm.tosa.mapping import TosaSpecialDtype

    return bool(node.meta.get(TosaSpecialDtype.meta_key()) == TosaSpecialDtype.INT48)


def tosa_context(compile_spec: Any, graph_module: GraphModule) -> Any:
    """The TosaLoweringContext ArmPassManager runs its pipeline in."""
    return ArmPassManager(compile_spec)._tosa_context(graph_module)


def permute_targets(graph_pass: Any) -> Any:
    """The permute ops a view/permute propagation pass works on (its ``_permute_targets``)."""
    return graph_pass._permute_targets


@contextlib.contextmanager
def disable_fake_mode_checks(fake_mode: Any) -> Iterator[None]:
    """``fake_mode.allow_non_fake_inputs = True`` for the block, as ExportPass's replay runs
    ops on real constants; the mode's previous setting is put back on exit."""
    previous = fake_mode.allow_non_fake_inputs
    fake_mode.allow_non_fake_inputs = True
    try:
        yield
    finally:
        fake_mode.allow_non_fake_inputs = previous


@contextlib.contextmanager
def capture_tosa_graphs(sink: list[tuple[bytes, GraphModule]]) -> Iterator[None]:
    """Append (TOSA flatbuffer, the graph it was serialized from) for every TOSA partition.

    The graph is the edge program's after the Arm pass pipeline (which rewrites the program in
    place): its node names are the flatbuffer's tensor names, and each node's ``from_node``
    provenance leads back to the nodes of the program that was lowered.
    """

    def recording(edge_program: ExportedProgram, compile_spec: Any, inner: Any) -> Any:
        result = inner(edge_program, compile_spec)
        sink.append((bytes(result.processed_bytes), edge_program.graph_module))
        return result

    with wrapped_preprocess(recording):
        yield


@contextlib.contextmanager
def capture_tosa_programs(sink: list[ExportedProgram]) -> Iterator[None]:
    """Append each TOSA partition's edge program as serialized: after the Arm pass pipeline, which
    rewrites it in place (graph of TOSA dialect ops, signature naming its user inputs)."""

    def recording(edge_program: ExportedProgram, compile_spec: Any, inner: Any) -> Any:
        result = inner(edge_program, compile_spec)
        sink.append(edge_program)
        return result

    with wrapped_preprocess(recording):
        yield


def replace_scalar_with_tensor_pass() -> type:
    """ExecuTorch's ``ReplaceScalarWithTensorArgPass`` (the base of the Arm profile pass)."""
    return ReplaceScalarWithTensorArgPass


#: Its ``get_replacement`` as ExecuTorch defines it (``upstream_fixes`` calls it for what stock handles).
STOCK_GET_REPLACEMENT = ReplaceScalarWithTensorArgPass.get_replacement


def full_op(op: Any) -> Any:
    """The ``full`` of `op`'s dialect (aten, or the edge dialect), as ``get_replacement`` picks it."""
    return torch.ops.aten.full.default if isinstance(op, OpOverload) else exir_ops.edge.aten.full.default
