"""Edge program -> Core ML ``MLModel``, as ExecuTorch's ``CoreMLBackend._convert_to_mlmodel`` does."""

from __future__ import annotations

import logging
import os
from typing import Any

import coremltools as ct

from lowerkit.coreml_preprocess import _upstream, _upstream_faster_conversion
from lowerkit.coreml_preprocess.compression import apply_weight_compression
from lowerkit.coreml_preprocess.embeddings import optimization_config
from lowerkit.coreml_preprocess.errors import CoreMLLoweringError
from lowerkit.coreml_preprocess.options import CoreMLCompileOptions, SpecKey
from lowerkit.coreml_preprocess.pass_pipeline import PIPELINE_METADATA_KEY
from lowerkit.coreml_preprocess.scope import coreml_scope
from lowerkit.coreml_preprocess.versions import accelerated_ok

logger = logging.getLogger(__name__)

#: Set to 1 to run ``ct.convert`` exactly as coremltools does (validating the MIL program after
#: every pass, collecting garbage at the end) instead of ``_upstream_faster_conversion.faster_conversion``.
STOCK_CONVERSION_ENV = "LOWERKIT_COREML_STOCK_CONVERSION"


def convert_to_mlmodel(
    edge_program: Any,
    options: CoreMLCompileOptions,
    *,
    compile_specs: list[Any] | None = None,
    skip_model_load: bool = True,
) -> Any:
    """Convert an edge ``ExportedProgram`` to a Core ML ``MLModel`` with these options.

    The same ``ct.convert`` call and post-conversion quantization as ExecuTorch 1.5.1, then
    lowerkit's ``weight_compression`` if set (every weighted op, see ``compression``); the
    pass pipeline is validated before conversion and, when not the default, recorded in the
    model's user-defined metadata under ``lowerkit.mil_pass_pipeline``. Runs inside
    ``coreml_scope()`` (lowering lock, lowerkit's op translations registered meanwhile).
    """
    with coreml_scope():
        return _convert(edge_program, options, compile_specs, skip_model_load)


def _convert(
    edge_program: Any, options: CoreMLCompileOptions, compile_specs: list[Any] | None, skip_model_load: bool
) -> Any:
    pipeline = options.mil_pass_pipeline
    ct_inputs = None
    if options.enumerated_shapes is not None:
        encoded = _encoded_shapes(edge_program, options, compile_specs)
        try:
            ct_inputs = _upstream.coreml_inputs_for_enumerated_shapes(edge_program, encoded)
        except AssertionError as error:
            raise CoreMLLoweringError(f"enumerated shapes do not fit the program: {error}") from None
        target = options.minimum_deployment_target
        enumerated = sum(1 for i in ct_inputs if isinstance(i.shape, ct.EnumeratedShapes))
        if enumerated > 1 and (target is None or target < ct.target.iOS18):
            raise CoreMLLoweringError(
                f"the program has {enumerated} enumerated inputs, but minimum_deployment_target "
                f"is {target}: several enumerated inputs need iOS18 or later."
            )
    convert_kwargs: dict[str, Any] = dict(
        model=edge_program,
        source="pytorch",
        convert_to="mlprogram",
        pass_pipeline=pipeline.to_coremltools(),
        skip_model_load=skip_model_load,
        compute_precision=options.compute_precision,
        minimum_deployment_target=options.minimum_deployment_target,
        compute_units=options.compute_unit,
        inputs=ct_inputs,
    )
    _upstream.reset_conversion_state()
    if os.environ.get(STOCK_CONVERSION_ENV, "") == "1" or not accelerated_ok("faster_conversion"):
        mlmodel = _convert_and_quantize(convert_kwargs, options)
    else:
        with _upstream_faster_conversion.faster_conversion():
            mlmodel = _convert_and_quantize(convert_kwargs, options)
    if options.weight_compression is not None:
        mlmodel = apply_weight_compression(mlmodel, edge_program, options.weight_compression)

    if pipeline.preset != "default":
        mlmodel.user_defined_metadata[PIPELINE_METADATA_KEY] = pipeline.provenance()
    return mlmodel


def _convert_and_quantize(convert_kwargs: dict[str, Any], options: CoreMLCompileOptions) -> Any:
    """``ct.convert``, then ExecuTorch's post-conversion linear weight quantization if asked."""
    mlmodel = ct.convert(**convert_kwargs)
    if options.op_linear_quantizer_config is None:
        return mlmodel
    import coremltools.optimize as cto

    quantizer = _upstream.linear_quantizer_config_from_dict(dict(options.op_linear_quantizer_config))
    config = optimization_config(
        _upstream.mil_program(mlmodel),
        quantizer,
        quantize_embedding_tables=options.quantize_embedding_tables,
    )
    return cto.coreml.linear_quantize_weights(mlmodel, config=config)


def _encoded_shapes(edge_program: Any, options: CoreMLCompileOptions, specs: list[Any] | None) -> str:
    for spec in specs or []:
        if spec.key == SpecKey.ENUMERATED_SHAPES.value:
            return bytes(spec.value).decode("utf-8")
    assert options.enumerated_shapes is not None
    shapes = {k: [list(s) for s in v] for k, v in options.enumerated_shapes.items()}
    return _upstream.encode_enumerated_shapes(edge_program, shapes)
