"""coreml-preprocess' rows of the table of accelerations (`lowerkit.pass_infra.accelerations.table`)."""

from __future__ import annotations

from lowerkit.coreml_preprocess._upstream_faster_conversion import FASTER_CONVERSION
from lowerkit.coreml_preprocess.llm_export import LLM_PARTITIONER
from lowerkit.coreml_preprocess.scope import COREML_SCOPE
from lowerkit.pass_infra.accelerations.table import Acceleration

__all__ = ["ACCELERATIONS"]

#: coreml-preprocess' patches (``lower_to_coreml`` also holds pass-infra's scopes).
ACCELERATIONS: tuple[Acceleration, ...] = (
    Acceleration(
        LLM_PARTITIONER,
        ("accelerated_coreml_llm_export()",),
        "`export_llama` to Core ML: lowerkit's Core ML partitioner and pt2e quantizer",
    ),
    Acceleration(
        COREML_SCOPE,
        ("coreml_scope()", "every Core ML lowering step"),
        "Core ML partitioning and preprocess",
        "lowerkit's op translations registered, ExecuTorch's Core ML backend import guarded",
    ),
    Acceleration(
        FASTER_CONVERSION,
        ("faster_conversion()", "CoreMLBackend.preprocess"),
        "`ct.convert`: MIL passes, validation, garbage collection; linear weight quantization",
        guarded_by={"coremltools.converters._converters_entry:gc": "coremltools.converters._converters_entry:convert"},
    ),
)
