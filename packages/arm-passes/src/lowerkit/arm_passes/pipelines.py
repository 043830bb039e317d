"""The exact pass lists ExecuTorch's ArmPassManager builds for a target: its backend pipeline and
the Arm quantizer's ``transform_for_annotation`` pipeline."""

from __future__ import annotations

from typing import Any

import torch
from torch.export import ExportedProgram

from lowerkit.arm_passes import _upstream
from lowerkit.arm_passes.devices import compile_spec_for, is_vgf

__all__ = ["arm_pipeline_passes", "arm_tfa_passes"]


class _Trivial(torch.nn.Module):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x + 1


def _trivial_program() -> ExportedProgram:
    from executorch.exir import to_edge

    program = torch.export.export(_Trivial(), (torch.ones(2),))
    return to_edge(program).exported_program()


def arm_pipeline_passes(target: str, exported_program: ExportedProgram | None = None) -> list[Any]:
    """The pass instances ArmPassManager.transform_to_backend_pipeline runs for `target`, in order.

    Passes that hold the exported program are built for `exported_program` (default: a trivial one).
    VGF targets: the pipeline ``VgfBackend.preprocess`` runs, i.e. its TOSA spec's with the
    VGF-only passes inserted.
    """
    program = exported_program if exported_program is not None else _trivial_program()
    spec = compile_spec_for(target)
    if not is_vgf(target):
        return _upstream.build_pass_list(spec, program)
    from executorch.backends.arm.tosa.backend import TOSABackend

    with _upstream.vgf_pass_insertions():
        return _upstream.build_pass_list(TOSABackend.filter_tosa_compile_specs(spec), program)


def arm_tfa_passes(target: str, graph_module: torch.fx.GraphModule | None = None) -> list[Any]:
    """The pass instances the Arm quantizer's ``transform_for_annotation`` runs for `target`, in order.

    Passes that hold the graph module are built for `graph_module` (default: a trivial one).
    """
    module = graph_module if graph_module is not None else torch.export.export(_Trivial(), (torch.ones(2),)).module()
    return _upstream.build_tfa_pass_list(compile_spec_for(target), module)
