"""``CoreMLPartitioner``: the same partitions and decomposition choices as ExecuTorch 1.5.1's."""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from typing import Any

import torch
from executorch.exir.backend.compile_spec_schema import CompileSpec
from executorch.exir.backend.partitioner import DelegationSpec, Partitioner, PartitionResult
from executorch.exir.backend.utils import tag_constant_data, tag_mutated_buffer
from torch.fx.passes.infra.partitioner import CapabilityBasedPartitioner
from torch.fx.passes.operator_support import OperatorSupportBase

from lowerkit.coreml_preprocess import _upstream, conflict
from lowerkit.coreml_preprocess.backend import CoreMLBackend
from lowerkit.coreml_preprocess.errors import CoreMLLoweringError, CoreMLOptionsError
from lowerkit.coreml_preprocess.options import CoreMLCompileOptions
from lowerkit.coreml_preprocess.scope import coreml_scope

logger = logging.getLogger(__name__)


def _unsupported_targets() -> frozenset[Any]:
    edge = _upstream.edge_ops().edge.aten
    aten = torch.ops.aten
    # Same list and reasons as ExecuTorch: coremltools#2565 (diagonal is wrong), #2569
    # (acosh/asinh missing), executorch#11722 (rand fails in coremltools 9.0).
    return frozenset(
        [
            aten.diagonal.default, aten.diagonal_copy.default,
            edge.diagonal.default, edge.diagonal_copy.default,
            aten.acosh.default, edge.acosh.default,
            aten.asinh.default, edge.asinh.default,
            aten.rand.default, edge.rand.default,
        ]
    )  # fmt: skip


class _CoreMLOperatorSupport(OperatorSupportBase):
    """ExecuTorch's ``_OperatorsSupportedForCoreMLBackend``, answers cached per node target."""

    def __init__(self, skip_ops: Sequence[str], lower_full_graph: bool, log: bool) -> None:
        super().__init__()
        self.skip_ops = list(skip_ops)
        self.lower_full_graph = lower_full_graph
        self._log = log
        self._logged: set[str] = set()
        self._unsupported = _unsupported_targets()
        edge = _upstream.edge_ops().edge.aten
        aten = torch.ops.aten
        self._alpha_ops = (aten.sub.Tensor, edge.sub.Tensor, aten.add.Tensor, edge.add.Tensor)
        self._arg_min_max = (
            aten.argmax.default, aten.argmin.default, edge.argmax.default, edge.argmin.default,
        )  # fmt: skip

    def log_once(self, message: str) -> None:
        if self._log and message not in self._logged:
            logger.info(message)
            self._logged.add(message)

    def _overridden(self, node: torch.fx.Node) -> bool:
        if node.target in self._alpha_ops and "alpha" in node.kwargs and node.kwargs["alpha"] != 1:
            self.log_once("aten.{sub, add}.Tensor with alpha != 1 is not supported by Core ML.")
            return True
        if node.target in self._unsupported:
            self.log_once(f"{node.target} is not supported by Core ML.")
            return True
        if node.target in self._arg_min_max:
            dim = node.args[1] if len(node.args) >= 2 else node.kwargs.get("dim", None)
            if dim is None:
                self.log_once("aten.{argmax, argmin} with dim=None is not supported by Core ML.")
                return True
        return False

    def is_node_supported(self, submodules: Any, node: torch.fx.Node) -> bool:
        if node.op == "get_attr":
            return True
        if node.op != "call_function":
            self.log_once(f"not delegating a {node.op} node (only get_attr and call_function are)")
            return False
        name = getattr(node.target, "__name__", "").lower()
        if name in self.skip_ops:
            if self.lower_full_graph:
                raise CoreMLOptionsError(
                    f"cannot skip {name} because lower_full_graph=True: set "
                    "skip_ops_for_coreml_delegation=None or lower_full_graph=False."
                )
            self.log_once(f"skipping {name}: it is in skip_ops_for_coreml_delegation")
            return False
        supported = _upstream.torch_op_supported(node) and not self._overridden(node)
        if not supported:
            if self.lower_full_graph:
                raise CoreMLLoweringError(
                    f"Core ML does not support the op {name}, but lower_full_graph=True: set "
                    "lower_full_graph=False to run unsupported ops outside Core ML, or rewrite "
                    "the model to avoid the op."
                )
            self.log_once(f"not delegating {name}: Core ML does not support it")
        return supported


_DO_NOT_DECOMPOSE_BLOCKLIST = (
    torch.ops.aten.triu.default,
    torch.ops.aten.tril.default,
    torch.ops.aten.repeat_interleave.self_int,
    torch.ops.aten.repeat_interleave.self_Tensor,
)


class CoreMLPartitioner(Partitioner):
    """Tags what Core ML supports for lowerkit's ``CoreMLBackend`` (ExecuTorch's arguments)."""

    def __init__(
        self,
        *,
        skip_ops_for_coreml_delegation: Sequence[str] | None = None,
        compile_specs: Sequence[CompileSpec] | CoreMLCompileOptions | None = None,
        take_over_mutable_buffer: bool = True,
        lower_full_graph: bool = False,
        take_over_constant_data: bool = True,
    ) -> None:
        conflict.ensure_sole_backend(CoreMLBackend)
        self.skip_ops_for_coreml_delegation = list(skip_ops_for_coreml_delegation or [])
        if isinstance(compile_specs, CoreMLCompileOptions):
            self.options = compile_specs
            self._specs: list[CompileSpec] | None = None
        else:
            self._specs = list(compile_specs or [])
            self.options = CoreMLCompileOptions.from_compile_specs(self._specs)
        if self.options.enumerated_shapes is not None and not lower_full_graph:
            raise CoreMLOptionsError(
                "enumerated shapes need the whole graph in Core ML: pass lower_full_graph=True."
            )
        self.take_over_mutable_buffer = take_over_mutable_buffer
        self.lower_full_graph = lower_full_graph
        self.take_over_constant_data = take_over_constant_data
        if lower_full_graph:
            if self.skip_ops_for_coreml_delegation:
                raise CoreMLOptionsError(
                    "lower_full_graph=True delegates every op: skip_ops_for_coreml_delegation "
                    "must be empty."
                )
            if not take_over_constant_data or not take_over_mutable_buffer:
                raise CoreMLOptionsError(
                    "lower_full_graph=True needs take_over_constant_data=True and "
                    "take_over_mutable_buffer=True."
                )
        self.delegation_spec = DelegationSpec(
            backend_id=CoreMLBackend.__name__,
            compile_specs=self._specs if self._specs is not None else [],
        )

    def _compile_specs_for(self, exported_program: Any) -> list[CompileSpec]:
        if self._specs is not None:
            return self._specs
        return self.options.to_compile_specs(exported_program)

    def partition(self, exported_program: Any) -> PartitionResult:
        """Tag the largest Core ML-supported subgraphs, constants and mutable buffers."""
        conflict.ensure_sole_backend(CoreMLBackend)
        if _upstream.called_from_deprecated_to_backend():
            logger.warning(
                "to_edge() + to_backend() decomposes ops Core ML has fast kernels for; prefer "
                "to_edge_transform_and_lower()."
            )
        spec = DelegationSpec(
            backend_id=CoreMLBackend.__name__,
            compile_specs=self._compile_specs_for(exported_program),
        )
        self.delegation_spec = spec
        with coreml_scope():
            return self._partition(exported_program, spec)

    def _partition(self, exported_program: Any, spec: DelegationSpec) -> PartitionResult:
        partitioner = CapabilityBasedPartitioner(
            exported_program.graph_module,
            _CoreMLOperatorSupport(self.skip_ops_for_coreml_delegation, self.lower_full_graph, log=True),
            allows_single_node_partition=True,
        )
        tags: dict[str, DelegationSpec] = {}
        for partition in partitioner.propose_partitions():
            for node in partition.nodes:
                tag = f"tag{partition.id}"
                node.meta["delegation_tag"] = tag
                tags[tag] = spec
        if self.take_over_constant_data:
            tag_constant_data(exported_program)
        if self.take_over_mutable_buffer:
            tag_mutated_buffer(exported_program)
        return PartitionResult(tagged_exported_program=exported_program, partition_tags=tags)

    def ops_to_not_decompose(
        self, ep: Any
    ) -> tuple[list[Any], Callable[[torch.fx.Node], bool] | None]:
        """Ops Core ML supports as they are, kept whole by ``to_edge_transform_and_lower``."""
        conflict.ensure_sole_backend(CoreMLBackend)
        with coreml_scope():
            return self._ops_to_not_decompose(ep)

    def _ops_to_not_decompose(
        self, ep: Any
    ) -> tuple[list[Any], Callable[[torch.fx.Node], bool] | None]:
        support = _CoreMLOperatorSupport(self.skip_ops_for_coreml_delegation, self.lower_full_graph, log=False)
        keep: list[Any] = []
        for node in ep.graph.nodes:
            if node.op == "call_function" and isinstance(node.target, _upstream.OpOverload):
                try:
                    if (
                        support.is_node_supported(None, node)
                        and node.target not in _DO_NOT_DECOMPOSE_BLOCKLIST
                        and not _upstream.is_view_op(node.target)
                    ):
                        keep.append(node.target)
                except Exception as error:
                    logger.info("treating %s as unsupported: %s", node.target, error)
        return keep, None
