"""Fixtures for the Core ML cross-package tests, and ExecuTorch's side of them as a script.

lowerkit's and ExecuTorch's Core ML backends cannot share a process (same backend id), so the
tests run this file as a subprocess (it imports ExecuTorch's Core ML modules only when run):

    python conftest.py CASES.json OUT_DIR

CASES.json is a list of {"name", "model", "options"} where "options" holds keyword arguments of
ExecuTorch's ``CoreMLBackend.generate_compile_specs`` as JSON (enum members by name), or null for
``CoreMLPartitioner()`` without compile specs. For each case OUT_DIR/<name>.json records the
delegates' compile specs and OUT_DIR/<name>.<i>.payload each delegate's processed bytes.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

#: A ``pass_names`` value standing for coremltools' default passes without the batch-norm folds.
NO_BN_FUSION = "no-batchnorm-fusion"
BN_FUSION_PASSES = ("common::fuse_conv_batchnorm", "common::fuse_elementwise_to_batchnorm")


def resolve_pass_names(value: Any) -> Any:
    """The named pass list ``NO_BN_FUSION`` as coremltools' pass names; other values as they are."""
    if value != NO_BN_FUSION:
        return value
    import coremltools as ct

    return [p for p in ct.PassPipeline.DEFAULT.passes if p not in BN_FUSION_PASSES]


def generate_specs(options: dict[str, Any]) -> list[Any]:
    """ExecuTorch's compile specs for JSON options (enum members given by name)."""
    import coremltools as ct
    from executorch.backends.apple.coreml.compiler import CoreMLBackend

    kwargs: dict[str, Any] = {}
    for key, value in options.items():
        if key == "compute_unit":
            kwargs[key] = ct.ComputeUnit[value]
        elif key == "minimum_deployment_target":
            kwargs[key] = None if value is None else ct.target[value]
        elif key == "compute_precision":
            kwargs[key] = ct.precision(value)
        elif key == "model_type":
            kwargs[key] = CoreMLBackend.MODEL_TYPE(value)
        elif key == "pass_names":
            kwargs[key] = resolve_pass_names(value)
        else:
            kwargs[key] = value
    return list(CoreMLBackend.generate_compile_specs(**kwargs))


def lower(model_name: str, options: dict[str, Any] | None) -> Any:
    """``to_edge_transform_and_lower`` a zoo model with ExecuTorch's CoreMLPartitioner."""
    import torch
    from executorch.backends.apple.coreml.partition import CoreMLPartitioner
    from executorch.exir import to_edge_transform_and_lower

    from lowerkit import zoo

    model = zoo.get(model_name)
    program = torch.export.export(model.module(), model.example_inputs())
    specs = None if options is None else generate_specs(options)
    return to_edge_transform_and_lower(program, partitioner=[CoreMLPartitioner(compile_specs=specs)])


def delegates(edge_manager: Any) -> list[Any]:
    """The lowered modules of an edge program manager, in graph order."""
    from executorch.exir.lowered_backend_module import LoweredBackendModule

    module = edge_manager.exported_program().graph_module
    return [m for _, m in module.named_children() if isinstance(m, LoweredBackendModule)]


def main() -> None:
    cases = json.loads(Path(sys.argv[1]).read_text())
    out = Path(sys.argv[2])
    out.mkdir(parents=True, exist_ok=True)
    for case in cases:
        lowered = delegates(lower(case["model"], case["options"]))
        record = []
        for index, module in enumerate(lowered):
            (out / f"{case['name']}.{index}.payload").write_bytes(module.processed_bytes)
            record.append(
                {
                    "backend_id": module.backend_id,
                    "compile_specs": [[s.key, bytes(s.value).decode("utf-8")] for s in module.compile_specs],
                }
            )
        (out / f"{case['name']}.json").write_text(json.dumps(record))


if __name__ == "__main__":
    main()
