"""lowerkit Core ML flows for ExecuTorch's operator suite (used by `bench.op_suite_flows`).

``lowerkit_coreml`` / ``lowerkit_coreml_static_int8`` mirror the stock ``coreml`` (float,
iOS15) and ``coreml_static_int8`` (quantized, iOS17) flows of
``executorch/backends/test/suite/flows/coreml.py``: same skip patterns, same quantize-or-not,
same stages, but the tester is the generic ``executorch.backends.test.harness.Tester`` with
lowerkit's ``CoreMLQuantizer`` (``lowerkit.coreml_quantizer``, the stock tester's static int8
config) and lowerkit's ``CoreMLPartitioner`` (``lowerkit.coreml_preprocess``, the stock
tester's compile specs: ExecuTorch's defaults with the flow's deployment target).

lowerkit's Core ML backend refuses a process where ExecuTorch's own
(``executorch.backends.apple.coreml``) was imported, and the stock flow module imports it, so
these flows replace the stock ``coreml*`` flows in their process (``--lowerkit-coreml``).
Nothing here imports lowerkit's Core ML packages until a tester is built.

Core ML cannot execute off macOS: there the stock flow fails every case at its run stage
(``Failed to execute method forward, error: 0x20``). `without_run` makes both sides stop after
``to_executorch`` + ``serialize``, so a case passes when it quantizes (if the flow does),
lowers and serializes.
"""

from __future__ import annotations

import dataclasses
import functools
import sys
from collections.abc import Callable
from typing import Any

#: lowerkit Core ML flow name -> (the stock flow it mirrors, quantize, minimum deployment target).
COREML_FLOWS = {
    "lowerkit_coreml": ("coreml", False, "iOS15"),
    "lowerkit_coreml_static_int8": ("coreml_static_int8", True, "iOS17"),
}

#: The stock Core ML flows' skip patterns (``flows/coreml.py``).
SKIP_PATTERNS = ["test_argmin", "test_argmax"]

#: True where a Core ML ``.pte`` cannot run (everywhere but macOS).
NO_COREML_RUNTIME = sys.platform != "darwin"


def lowerkit_coreml_tester(
    module: Any, example_inputs: Any, dynamic_shapes: Any = None, *, minimum_deployment_target: str = "iOS15"
) -> Any:
    """The stock ``CoreMLTester``'s stages with lowerkit's quantizer and partitioner."""
    from executorch.backends.test.harness import Tester
    from executorch.backends.test.harness.stages import (
        Partition,
        Quantize,
        StageType,
        ToEdgeTransformAndLower,
    )

    from lowerkit.coreml_preprocess import CoreMLCompileOptions, CoreMLPartitioner
    from lowerkit.coreml_quantizer import CoreMLQuantizer, static_int8_config

    def default_partitioner() -> Any:
        return CoreMLPartitioner(compile_specs=CoreMLCompileOptions(minimum_deployment_target=minimum_deployment_target))

    def quantize(quantizer: Any = None, quantization_config: Any = None, **kwargs: Any) -> Any:
        return Quantize(quantizer=quantizer or CoreMLQuantizer(quantization_config or static_int8_config()), **kwargs)

    def partition(partitioner: Any = None) -> Any:
        return Partition(partitioner or default_partitioner())

    def lower(partitioners: Any = None, edge_compile_config: Any = None) -> Any:
        return ToEdgeTransformAndLower(default_partitioner, partitioners, edge_compile_config)

    stages = Tester.default_stage_classes() | {
        StageType.QUANTIZE: quantize,
        StageType.PARTITION: partition,
        StageType.TO_EDGE_TRANSFORM_AND_LOWER: lower,
    }
    return Tester(module, example_inputs, stage_classes=stages, dynamic_shapes=dynamic_shapes)


def lowerkit_coreml_flows() -> list[Any]:
    """The lowerkit Core ML flows, as the suite's ``TestFlow`` s."""
    from executorch.backends.test.suite.flow import TestFlow

    return [
        TestFlow(
            name,
            backend="coreml",
            tester_factory=functools.partial(lowerkit_coreml_tester, minimum_deployment_target=target),
            quantize=quantize,
            skip_patterns=list(SKIP_PATTERNS),
        )
        for name, (_, quantize, target) in COREML_FLOWS.items()
    ]


def without_run(flow: Any) -> Any:
    """``flow`` whose testers skip ``run_method_and_compare_outputs`` (a no-op returning the tester)."""
    factory: Callable[..., Any] = flow.tester_factory

    def tester_factory(*args: Any, **kwargs: Any) -> Any:
        tester = factory(*args, **kwargs)
        tester.run_method_and_compare_outputs = lambda *a, **k: tester
        return tester

    return dataclasses.replace(flow, tester_factory=tester_factory)
