"""Checking that a model was captured with ``torch.export`` before quantizing it."""

from __future__ import annotations

from typing import Any

import torch
from torch.fx import GraphModule

from lowerkit.coreml_quantizer.errors import CoreMLQuantizerError

_HOW = (
    "Capture it first: `torch.export.export(model, example_inputs).module()` and pass "
    "the resulting GraphModule."
)


def require_exported(model: Any) -> GraphModule:
    """Return ``model`` if it is an exported GraphModule, else raise `CoreMLQuantizerError`."""
    if isinstance(model, torch.export.ExportedProgram):
        raise CoreMLQuantizerError(
            "got an ExportedProgram; pt2e quantization works on its GraphModule: "
            "pass `exported_program.module()`."
        )
    if not isinstance(model, GraphModule):
        raise CoreMLQuantizerError(
            f"got a {type(model).__name__}, not an exported GraphModule. {_HOW}"
        )
    for node in model.graph.nodes:
        if node.op == "placeholder" and "val" not in node.meta:
            raise CoreMLQuantizerError(
                f"the GraphModule was not produced by torch.export (its input {node.name!r} "
                f"has no 'val' metadata; was it symbolically traced?). {_HOW}"
            )
    return model
