"""Arm pipeline passes with a bug built in, for checking the pass bisection names them.

Each mimics a real kind of upstream pass bug: a rewrite that copies the wrong output scale
onto a node, and a weight re-layout with a sign slip. Insert one with
``lowerkit.arm_passes.runner.passes_inserted_after(AFTER, [Bug()])``.
"""

from __future__ import annotations

from typing import Any

import torch
from executorch.backends.arm._passes import FoldAndAnnotateQParamsPass, RewriteConvPass
from executorch.exir.pass_base import ExportPass
from torch.export.graph_signature import InputKind
from torch.fx import GraphModule
from torch.fx.passes.infra.pass_base import PassResult

__all__ = ["NegateOneWeightPass", "ScaleOneOutputQParamPass"]


class ScaleOneOutputQParamPass(ExportPass):
    """Doubles the output scale of the first quantized op (its users keep the old one)."""

    AFTER = FoldAndAnnotateQParamsPass

    def call(self, graph_module: GraphModule) -> PassResult:
        for node in graph_module.graph.nodes:
            qparams = node.meta.get("output_qparams")
            if node.op == "call_function" and qparams and 0 in qparams:
                qparams[0] = qparams[0]._replace(scale=qparams[0].scale * 2.0)
                return PassResult(graph_module, True)
        return PassResult(graph_module, False)


class NegateOneWeightPass(ExportPass):
    """Negates the weight constant of the first TOSA CONV2D (int8), as a re-layout with a sign slip would."""

    AFTER = RewriteConvPass

    def __init__(self) -> None:
        super().__init__()
        self.exported_program: Any = None  # set by the pass manager, as for upstream's passes

    def call(self, graph_module: GraphModule) -> PassResult:
        program = self.exported_program
        conv = next((n for n in graph_module.graph.nodes if "CONV2D" in str(n.target)), None)
        if conv is None or program is None:
            return PassResult(graph_module, False)
        weight = conv.args[1]
        for spec in program.graph_signature.input_specs:
            if spec.kind == InputKind.USER_INPUT or getattr(spec.arg, "name", None) != weight.name:
                continue
            store = program.constants if spec.target in program.constants else program.state_dict
            store[spec.target] = torch.clamp(-store[spec.target].to(torch.int32), -128, 127).to(torch.int8)
            return PassResult(graph_module, True)
        return PassResult(graph_module, False)
