"""ExecuTorch's LLM export (``export_llm`` / ``export_llama``) to Core ML through lowerkit's backend.

``export_llama`` builds ExecuTorch's ``CoreMLPartitioner`` in one function,
``executorch.extension.llm.export.partitioner_lib.get_coreml_partitioner``. Inside
`accelerated_coreml_llm_export` that function builds lowerkit's `CoreMLPartitioner` with the same
options instead (`coreml_partitioner`): the same Core ML model (the canonical payload; lowerkit names
it from its content where ExecuTorch writes a random id) from lowerkit's faster, deterministic
preprocess, and ExecuTorch's generic stages run inside pass-infra's accelerated scopes. Its pt2e
Core ML quantizer (``quantizer_lib.get_coreml_quantizer``, ``coreml_8a_c8w``) is coreml-quantizer's
``CoreMLQuantizer`` with ExecuTorch's config: the same annotations, without ExecuTorch's ~400 strict
pattern exports per ``prepare_pt2e`` (`coreml_quantizer`). ExecuTorch's own Core ML backend must not
be loaded in that process (see ``conflict``).

    from executorch.examples.models.llama.export_llama_lib import export_llama
    from lowerkit.coreml_preprocess import accelerated_coreml_llm_export

    with accelerated_coreml_llm_export():
        export_llama(config)        # backend.coreml.enabled=True
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from lowerkit.coreml_preprocess.options import CoreMLCompileOptions, ModelType
from lowerkit.coreml_preprocess.partitioner import CoreMLPartitioner
from lowerkit.coreml_preprocess.versions import PROVEN_ON
from lowerkit.pass_infra.accelerations.lowering import accelerated_lowering
from lowerkit.pass_infra.accelerations.patching import Patch, Replacement
from lowerkit.pass_infra.accelerations.quantization import accelerated_quantization
from lowerkit.pass_infra.accelerations.reexport import REEXPORT
from lowerkit.pass_infra.accelerations.versions import proven_scope

__all__ = ["LLM_PARTITIONER", "accelerated_coreml_llm_export", "coreml_partitioner", "coreml_quantizer"]

#: ``coreml_quantize`` -> ExecuTorch's ``op_linear_quantizer_config`` for it.
_WEIGHT_QUANTIZATION: dict[str, dict[str, Any]] = {
    "b4w": {"mode": "linear_symmetric", "dtype": "int4", "granularity": "per_block", "block_size": 32,
            "weight_threshold": 512},
    "c4w": {"mode": "linear_symmetric", "dtype": "int4", "granularity": "per_channel"},
}  # fmt: skip


def _validate(ios: int, embedding_quantize: str | None, pt2e_quantize: str | None, coreml_quantize: str | None) -> None:
    """ExecuTorch's checks, with its errors."""
    assert ios in (15, 16, 17, 18)
    if embedding_quantize is not None and ios < 18:
        raise ValueError("In Core ML, per-block quantization is introduced in iOS 18")
    quantizes = {q for q in (pt2e_quantize, coreml_quantize) if q is not None}
    if quantizes and ios < 16:
        raise ValueError("In Core ML, quantization is introduced in iOS 16")
    if any("8a" in q for q in quantizes) and ios < 17:
        raise ValueError("In Core ML, 8-bit activation quantization is introduced in iOS 17")
    if any("4w" in q for q in quantizes) and ios < 18:
        raise ValueError("In Core ML, 4-bit weight compression is introduced in iOS 18")


def coreml_partitioner(
    ios: int = 15,
    embedding_quantize: str | None = None,
    pt2e_quantize: str | None = None,
    coreml_quantize: str | None = None,
    coreml_compute_units: str | None = None,
) -> CoreMLPartitioner:
    """``partitioner_lib.get_coreml_partitioner`` (same arguments, checks and options), lowerkit's partitioner."""
    _validate(ios, embedding_quantize, pt2e_quantize, coreml_quantize)
    units = (coreml_compute_units or "cpu_only").lower()  # ExecuTorch's default: CPU decode is fastest
    if units not in ("cpu_only", "cpu_and_gpu", "cpu_and_ne", "all"):
        raise KeyError(units)
    options = CoreMLCompileOptions(
        minimum_deployment_target=f"iOS{ios}",
        compute_precision="float16",
        compute_unit=units,
        model_type=ModelType.MODEL,
        op_linear_quantizer_config=_WEIGHT_QUANTIZATION.get(coreml_quantize or ""),
    )
    # ExecuTorch's LLM runner does not hand state to the Core ML delegate: the KV cache stays in
    # ExecuTorch's memory (its take_over_mutable_buffer=False).
    return CoreMLPartitioner(compile_specs=options, take_over_mutable_buffer=False)


def coreml_quantizer(pt2e_quantize: str) -> Any:
    """``quantizer_lib.get_coreml_quantizer``: for ``coreml_8a_c8w`` coreml-quantizer's
    ``CoreMLQuantizer`` with ExecuTorch's config (affine, quint8 activations, per-channel qint8
    weights); any other value ExecuTorch's own function (its quantizer, or its error)."""
    if pt2e_quantize != "coreml_8a_c8w":
        return _upstream_quantizer_lib().get_coreml_quantizer(pt2e_quantize)
    import torch
    from coremltools.optimize.torch.quantization.quantization_config import (
        LinearQuantizerConfig,
        QuantizationScheme,
    )

    from lowerkit.coreml_quantizer.quantizer import CoreMLQuantizer

    config = LinearQuantizerConfig.from_dict(
        {
            "global_config": {
                "quantization_scheme": QuantizationScheme.affine,
                "activation_dtype": torch.quint8,
                "weight_dtype": torch.qint8,
                "weight_per_channel": True,
            }
        }
    )
    return CoreMLQuantizer(config)


def _upstream_quantizer_lib() -> Any:
    from executorch.extension.llm.export import quantizer_lib

    return quantizer_lib


def _replacements() -> list[Replacement]:
    from executorch.examples.models.llama import export_llama_lib
    from executorch.extension.llm.export import partitioner_lib

    return [
        Replacement(partitioner_lib, "get_coreml_partitioner", coreml_partitioner),
        Replacement(export_llama_lib, "get_coreml_partitioner", coreml_partitioner),  # imported by name
        Replacement(export_llama_lib, "get_coreml_quantizer", coreml_quantizer),  # imported by name
    ]


#: ExecuTorch's LLM export builds lowerkit's Core ML partitioner and quantizer (held by `accelerated_coreml_llm_export`).
LLM_PARTITIONER = Patch("lowerkit.coreml_preprocess.llm_export", _replacements)


@contextmanager
def accelerated_coreml_llm_export() -> Iterator[None]:
    """Within the block, ``export_llama`` lowers to Core ML with lowerkit's backend, faster, the same model.

    Holds `LLM_PARTITIONER`, pass-infra's ``REEXPORT`` (the builder's re-export of the module its
    first export made, without a second trace), ``accelerated_quantization()`` and
    ``accelerated_lowering()``, and the lowering lock. Stock (with an ``UnprovenVersionWarning``)
    on versions other than ``PROVEN_ON``: then ExecuTorch's Core ML backend must be importable.
    """
    with proven_scope(
        "lowerkit-coreml-preprocess", PROVEN_ON, "accelerated_coreml_llm_export",
        LLM_PARTITIONER.scope(), REEXPORT.scope(), accelerated_quantization(), accelerated_lowering(),
    ):  # fmt: skip
        yield
