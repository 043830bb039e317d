"""CoreMLCompileOptions: defaults, validation, and the compile-spec round trip."""

from __future__ import annotations

import json

import coremltools as ct
import pytest
from executorch.exir.backend.compile_spec_schema import CompileSpec

from lowerkit.coreml_preprocess import (
    CoreMLCompileOptions,
    CoreMLOptionsError,
    ModelType,
    MultimethodWeightSharing,
    PassPipelineError,
    SpecKey,
)

INT8 = {"mode": "linear_symmetric", "dtype": "int8", "granularity": "per_channel"}
INT4 = {"mode": "linear_symmetric", "dtype": "int4", "granularity": "per_block", "block_size": 32}


def _pairs(specs):
    return [(s.key, bytes(s.value)) for s in specs]


def test_defaults_are_executorchs():
    options = CoreMLCompileOptions()
    assert options.compute_unit is ct.ComputeUnit.ALL
    assert options.minimum_deployment_target is None
    assert options.compute_precision is ct.precision.FLOAT16
    assert options.model_type is ModelType.MODEL
    assert options.op_linear_quantizer_config is None
    assert options.pass_pipeline == "default"
    assert options.multimethod_weight_sharing_strategy is MultimethodWeightSharing.POSITIONAL
    assert _pairs(options.to_compile_specs()) == [
        ("compute_units", b"all"),
        ("min_deployment_target", b""),
        ("model_compute_precision", b"float16"),
        ("model_type", b"model"),
    ]
    assert CoreMLCompileOptions.from_compile_specs([]) == options


MATRIX = [
    CoreMLCompileOptions(),
    CoreMLCompileOptions(compute_unit="cpu_only", minimum_deployment_target="iOS18"),
    CoreMLCompileOptions(
        compute_unit=ct.ComputeUnit.CPU_AND_NE,
        minimum_deployment_target=ct.target.iOS16,
        compute_precision="float32",
        model_type="compiled_model",  # type: ignore[arg-type]  # strings are coerced
    ),
    CoreMLCompileOptions(op_linear_quantizer_config=INT8, quantize_embedding_tables=True),
    CoreMLCompileOptions(minimum_deployment_target="iOS18", op_linear_quantizer_config=INT4),
    CoreMLCompileOptions(pass_pipeline="empty", multimethod_weight_sharing_strategy="disabled"),  # type: ignore[arg-type]
    CoreMLCompileOptions(pass_pipeline=["common::dead_code_elimination", "common::const_elimination"]),
]


@pytest.mark.parametrize("options", MATRIX, ids=range(len(MATRIX)))
def test_round_trip(options):
    specs = options.to_compile_specs()
    back = CoreMLCompileOptions.from_compile_specs(specs)
    assert back == options
    assert _pairs(back.to_compile_specs()) == _pairs(specs)


def test_encodings():
    options = CoreMLCompileOptions(
        compute_unit="cpu_and_gpu",
        minimum_deployment_target="iOS17",
        op_linear_quantizer_config=INT8,
        pass_pipeline=["common::dead_code_elimination"],
        multimethod_weight_sharing_strategy=MultimethodWeightSharing.DISABLED,
        quantize_embedding_tables=True,
    )
    assert _pairs(options.to_compile_specs()) == [
        ("compute_units", b"cpu_and_gpu"),
        ("min_deployment_target", b"8"),
        ("model_compute_precision", b"float16"),
        ("model_type", b"model"),
        ("op_linear_quantizer_config", json.dumps(INT8).encode()),
        ("pass_pipeline", b'["common::dead_code_elimination"]'),
        ("multimethod_weight_sharing_strategy", b"disabled"),
        ("lowerkit.quantize_embedding_tables", b"true"),
    ]


def test_empty_pass_list_is_the_empty_preset():
    assert CoreMLCompileOptions(pass_pipeline=[]).pass_pipeline == "empty"
    spec = CompileSpec("pass_pipeline", b"[]")
    assert CoreMLCompileOptions.from_compile_specs([spec]).pass_pipeline == "empty"


def test_unknown_key_lists_valid_keys():
    with pytest.raises(CoreMLOptionsError) as raised:
        CoreMLCompileOptions.from_compile_specs([CompileSpec("compute_unit", b"all")])
    message = str(raised.value)
    assert "Did you mean 'compute_units'?" in message
    for key in SpecKey:
        assert key.value in message


def test_duplicate_key_is_an_error():
    specs = [CompileSpec("compute_units", b"all"), CompileSpec("compute_units", b"cpu_only")]
    with pytest.raises(CoreMLOptionsError, match="twice"):
        CoreMLCompileOptions.from_compile_specs(specs)


@pytest.mark.parametrize(
    ("key", "value", "listed"),
    [
        ("compute_units", b"cpu", "cpu_only"),
        ("min_deployment_target", b"99", "9"),
        ("model_compute_precision", b"float8", "float16"),
        ("model_type", b"mlpackage", "compiled_model"),
        ("multimethod_weight_sharing_strategy", b"always", "positional"),
        ("lowerkit.quantize_embedding_tables", b"yes", "true"),
        ("pass_pipeline", b'"common::dead_code_elimination"', "list"),
        ("op_linear_quantizer_config", b"{not json", "JSON"),
    ],
)
def test_unknown_spec_values_list_valid_ones(key, value, listed):
    with pytest.raises(CoreMLOptionsError) as raised:
        CoreMLCompileOptions.from_compile_specs([CompileSpec(key, value)])
    assert listed in str(raised.value)


@pytest.mark.parametrize(
    ("kwargs", "listed"),
    [
        ({"compute_unit": "gpu"}, "cpu_and_gpu"),
        ({"minimum_deployment_target": "iOS19"}, "iOS18"),
        ({"compute_precision": "half"}, "float16"),
        ({"model_type": "package"}, "compiled_model"),
        ({"op_linear_quantizer_config": {"mode": "linear_symmetric", "dtyp": "int8"}}, "dtype"),
        ({"op_linear_quantizer_config": "int8"}, "dict"),
        ({"quantize_embedding_tables": True}, "op_linear_quantizer_config"),
        ({"enumerated_shapes": {"x": "1,2"}}, "list of shapes"),
    ],
)
def test_invalid_fields(kwargs, listed):
    with pytest.raises(CoreMLOptionsError) as raised:
        CoreMLCompileOptions(**kwargs)
    assert listed in str(raised.value)


def test_misspelt_pass_in_specs_is_caught_while_decoding():
    spec = CompileSpec("pass_pipeline", b'["common::fuse_conv_batchnrom"]')
    with pytest.raises(PassPipelineError, match="common::fuse_conv_batchnorm"):
        CoreMLCompileOptions.from_compile_specs([spec])


def test_target_aliases_and_ints():
    assert CoreMLCompileOptions(minimum_deployment_target="macOS15").minimum_deployment_target is ct.target.iOS18
    assert CoreMLCompileOptions(minimum_deployment_target=7).minimum_deployment_target is ct.target.iOS16


def test_enumerated_shapes_need_the_program():
    options = CoreMLCompileOptions(enumerated_shapes={"x": [[1, 3], [2, 3]]})
    assert options.enumerated_shapes == {"x": ((1, 3), (2, 3))}
    with pytest.raises(CoreMLOptionsError, match="exported_program"):
        options.to_compile_specs()
