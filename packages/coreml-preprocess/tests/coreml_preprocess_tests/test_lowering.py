"""End to end on small torch modules: determinism, pass pipelines, embedding tables, errors."""

from __future__ import annotations

import coremltools as ct
import numpy as np
import pytest
import torch
from executorch.exir import to_edge, to_edge_transform_and_lower
from executorch.exir.backend.compile_spec_schema import CompileSpec
from executorch.exir.lowered_backend_module import LoweredBackendModule

from lowerkit.coreml_compiler_ops import decode_constexpr_weights
from lowerkit.coreml_preprocess import (
    PIPELINE_METADATA_KEY,
    CoreMLBackend,
    CoreMLCompileOptions,
    CoreMLOptionsError,
    CoreMLPartitioner,
    PassPipelineError,
    convert_to_mlmodel,
    files_of,
    unflatten_payload,
)
from lowerkit.coreml_preprocess.package import CONVERSION_DATE_KEY


class ConvBn(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.conv = torch.nn.Conv2d(3, 8, 3, padding=1, bias=False)
        self.bn = torch.nn.BatchNorm2d(8)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.relu(self.bn(self.conv(x)))


class SmallLM(torch.nn.Module):
    def __init__(self, tied: bool) -> None:
        super().__init__()
        self.embedding = torch.nn.Embedding(128, 32)
        self.norm = torch.nn.LayerNorm(32)
        self.head = torch.nn.Linear(32, 128, bias=False)
        if tied:
            self.head.weight = self.embedding.weight

    def forward(self, tokens: torch.Tensor) -> torch.Tensor:
        return self.head(self.norm(self.embedding(tokens)))


def _conv_bn_program():
    torch.manual_seed(0)
    module = ConvBn().eval()
    with torch.no_grad():
        module.bn.running_mean.uniform_(-1, 1)
        module.bn.running_var.uniform_(0.5, 2)
    return torch.export.export(module, (torch.randn(1, 3, 8, 8),))


def _lm_program(tied: bool):
    torch.manual_seed(0)
    module = SmallLM(tied).eval()
    return module, torch.export.export(module, (torch.randint(0, 128, (1, 8)),))


def _ops(mlmodel):
    program = mlmodel._mil_program

    def walk(block):
        for op in block.operations:
            yield op
            for nested in op.blocks:
                yield from walk(nested)

    return [op for f in program.functions.values() for op in walk(f)]


def _lower(program, specs=None):
    manager = to_edge_transform_and_lower(program, partitioner=[CoreMLPartitioner(compile_specs=specs)])
    module = manager.exported_program().graph_module
    lowered = [m for _, m in module.named_children() if isinstance(m, LoweredBackendModule)]
    return manager, lowered


def test_lowering_is_deterministic(monkeypatch):
    monkeypatch.delenv("SOURCE_DATE_EPOCH", raising=False)
    first, lowered_a = _lower(_conv_bn_program())
    second, lowered_b = _lower(_conv_bn_program())
    assert len(lowered_a) == 1 and lowered_a[0].backend_id == "CoreMLBackend"
    assert lowered_a[0].processed_bytes == lowered_b[0].processed_bytes
    assert first.to_executorch().buffer == second.to_executorch().buffer
    _, tree = unflatten_payload(lowered_a[0].processed_bytes)
    files = files_of(tree)
    assert sorted(files) == [
        "debug_info.json",
        "metadata.json",
        "model.mlpackage/Data/com.apple.CoreML/model.mlmodel",
        "model.mlpackage/Data/com.apple.CoreML/weights/weight.bin",
        "model.mlpackage/Manifest.json",
        "model.mlpackage/executorch_debug_handle_mapping.json",
    ]
    spec = ct.proto.Model_pb2.Model()
    spec.ParseFromString(files["model.mlpackage/Data/com.apple.CoreML/model.mlmodel"])
    assert CONVERSION_DATE_KEY not in spec.description.metadata.userDefined


def test_source_date_epoch_sets_the_conversion_date(monkeypatch):
    monkeypatch.setenv("SOURCE_DATE_EPOCH", "86400")
    _, lowered = _lower(_conv_bn_program())
    files = files_of(unflatten_payload(lowered[0].processed_bytes)[1])
    spec = ct.proto.Model_pb2.Model()
    spec.ParseFromString(files["model.mlpackage/Data/com.apple.CoreML/model.mlmodel"])
    assert spec.description.metadata.userDefined[CONVERSION_DATE_KEY] == "1970-01-02"


def test_default_pipeline_fuses_conv_batchnorm():
    edge = to_edge(_conv_bn_program()).exported_program()
    mlmodel = convert_to_mlmodel(edge, CoreMLCompileOptions())
    assert "batch_norm" not in [op.op_type for op in _ops(mlmodel)]
    assert PIPELINE_METADATA_KEY not in mlmodel.user_defined_metadata


def test_pipeline_without_fusion_keeps_batchnorm_and_records_itself():
    passes = [p for p in ct.PassPipeline.DEFAULT.passes if "batchnorm" not in p]
    edge = to_edge(_conv_bn_program()).exported_program()
    mlmodel = convert_to_mlmodel(edge, CoreMLCompileOptions(pass_pipeline=passes))
    assert "batch_norm" in [op.op_type for op in _ops(mlmodel)]
    recorded = mlmodel.user_defined_metadata[PIPELINE_METADATA_KEY]
    assert CoreMLCompileOptions(pass_pipeline=passes).mil_pass_pipeline.provenance() == recorded
    assert '"common::fuse_conv_bias"' in recorded and "fuse_conv_batchnorm" not in recorded


def test_misspelt_pass_fails_before_conversion(monkeypatch):
    edge = to_edge(_conv_bn_program()).exported_program()

    def no_conversion(*args, **kwargs):
        raise AssertionError("ct.convert must not run")

    monkeypatch.setattr(ct, "convert", no_conversion)
    specs = [CompileSpec("pass_pipeline", b'["common::fuse_conv_batchnrom"]')]
    with pytest.raises(PassPipelineError, match="Did you mean 'common::fuse_conv_batchnorm'"):
        CoreMLBackend.preprocess(edge, specs)
    with pytest.raises(PassPipelineError):
        CoreMLPartitioner(compile_specs=specs)


INT8 = {"mode": "linear_symmetric", "dtype": "int8", "granularity": "per_channel"}
INT4 = {"mode": "linear_symmetric", "dtype": "int4", "granularity": "per_block", "block_size": 16}


def _table_op(mlmodel):
    gather = next(op for op in _ops(mlmodel) if op.op_type == "gather")
    return gather.x.op


@pytest.mark.parametrize(
    ("tied", "config", "target", "quantize_tables", "compressed"),
    [
        (True, INT8, "iOS17", False, True),
        (True, INT4, "iOS18", False, True),
        (False, INT8, "iOS17", False, False),
        (False, INT8, "iOS17", True, True),
        (True, None, "iOS17", False, False),
    ],
)
def test_embedding_table_compressed_exactly_when_asked(tied, config, target, quantize_tables, compressed):
    module, program = _lm_program(tied)
    options = CoreMLCompileOptions(
        minimum_deployment_target=target,
        op_linear_quantizer_config=config,
        quantize_embedding_tables=quantize_tables,
    )
    mlmodel = convert_to_mlmodel(to_edge(program).exported_program(), options)
    table_op = _table_op(mlmodel)
    assert table_op.op_type.startswith("constexpr_") is compressed
    if compressed:
        decoded = decode_constexpr_weights(mlmodel)[table_op.outputs[0].name]
        table = module.embedding.weight.detach().numpy()
        step = np.abs(table).max(axis=1, keepdims=True) / (127 if config is INT8 else 7)
        if config is INT4:
            step = np.abs(table).reshape(128, 2, 16).max(axis=2).repeat(16, axis=1) / 7
        assert np.all(np.abs(decoded.astype(np.float32) - table) <= step / 2 + 1e-2)
    if tied and config is not None:
        head = next(op for op in _ops(mlmodel) if op.op_type == "linear")
        assert head.weight.op is table_op


def test_partitioner_argument_errors():
    with pytest.raises(CoreMLOptionsError, match="skip_ops_for_coreml_delegation"):
        CoreMLPartitioner(lower_full_graph=True, skip_ops_for_coreml_delegation=["relu"])
    with pytest.raises(CoreMLOptionsError, match="lower_full_graph=True"):
        CoreMLPartitioner(compile_specs=CoreMLCompileOptions(enumerated_shapes={"x": [[1, 3], [2, 3]]}))


def test_skip_ops_leave_them_outside():
    _, lowered = _lower(_conv_bn_program())
    manager = to_edge_transform_and_lower(
        _conv_bn_program(),
        partitioner=[CoreMLPartitioner(skip_ops_for_coreml_delegation=["aten.relu.default"])],
    )
    targets = [str(n.target) for n in manager.exported_program().graph.nodes if n.op == "call_function"]
    assert any("relu" in t for t in targets)
    assert len(lowered) == 1


@pytest.mark.parametrize("quantized", [None, "int8", "int4"])
def test_faster_conversion_gives_the_stock_result(monkeypatch, quantized):
    from lowerkit.coreml_preprocess.convert import STOCK_CONVERSION_ENV

    def program():
        return _lm_program(tied=True)[1] if quantized else _conv_bn_program()

    specs = None
    if quantized == "int8":
        options = CoreMLCompileOptions(minimum_deployment_target="iOS17", op_linear_quantizer_config=INT8)
        specs = options.to_compile_specs()
    elif quantized == "int4":
        options = CoreMLCompileOptions(minimum_deployment_target="iOS18", op_linear_quantizer_config=INT4)
        specs = options.to_compile_specs()
    monkeypatch.setenv(STOCK_CONVERSION_ENV, "1")
    _, stock = _lower(program(), specs)
    monkeypatch.delenv(STOCK_CONVERSION_ENV)
    _, fast = _lower(program(), specs)
    assert stock[0].processed_bytes == fast[0].processed_bytes


class Dense(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.linear = torch.nn.Linear(16, 16)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.relu(self.linear(x))


def _two_methods(strategy):
    torch.manual_seed(0)
    module = Dense().eval()
    programs = {
        "decode": torch.export.export(module, (torch.randn(1, 16),)),
        "prefill": torch.export.export(module, (torch.randn(4, 16),)),
    }
    options = CoreMLCompileOptions(multimethod_weight_sharing_strategy=strategy)
    return to_edge_transform_and_lower(
        programs, partitioner=[CoreMLPartitioner(compile_specs=options.to_compile_specs())]
    )


def test_positional_weight_sharing_combines_methods_deterministically():
    import json

    first, second = _two_methods("positional"), _two_methods("positional")
    assert first.to_executorch().buffer == second.to_executorch().buffer
    decode = first.exported_program("decode").graph_module.lowered_module_0
    prefill = first.exported_program("prefill").graph_module.lowered_module_0
    assert decode.processed_bytes.startswith(b"CMJR") and prefill.processed_bytes.startswith(b"CMJR")
    reference = json.loads(decode.processed_bytes[4:])
    assert reference["functionName"] == "decode"
    assert json.loads(prefill.processed_bytes[4:])["key"] == reference["key"]
    store = decode.named_data_store_output
    blob = store.buffers[store.pte_data[reference["key"]].buffer_index]
    files = files_of(unflatten_payload(blob)[1])
    metadata = json.loads(files["metadata.json"])
    assert sorted(metadata["methods"]) == ["decode", "prefill"]
    assert reference["key"] == "coreml_" + metadata["identifier"]


def test_disabled_weight_sharing_lowers_methods_independently():
    manager = _two_methods("disabled")
    for method in ("decode", "prefill"):
        payload = manager.exported_program(method).graph_module.lowered_module_0.processed_bytes
        assert "metadata.json" in files_of(unflatten_payload(payload)[1])


def test_enumerated_shapes_round_trip_and_lower():
    torch.manual_seed(0)
    batch = torch.export.Dim("batch", min=1, max=8)
    program = torch.export.export(
        Dense().eval(), (torch.randn(2, 16),), dynamic_shapes={"x": {0: batch}}
    )
    options = CoreMLCompileOptions(enumerated_shapes={"x": [[1, 16], [4, 16]]})
    specs = options.to_compile_specs(program)
    assert CoreMLCompileOptions.from_compile_specs(specs) == options
    manager = to_edge_transform_and_lower(
        program, partitioner=[CoreMLPartitioner(compile_specs=options, lower_full_graph=True)]
    )
    payload = manager.exported_program().graph_module.lowered_module_0.processed_bytes
    spec = ct.proto.Model_pb2.Model()
    spec.ParseFromString(files_of(unflatten_payload(payload)[1])["model.mlpackage/Data/com.apple.CoreML/model.mlmodel"])
    shapes = spec.description.input[0].type.multiArrayType.enumeratedShapes.shapes
    assert [list(s.shape) for s in shapes] == [[1, 16], [4, 16]]


class Stateful(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.register_buffer("cache", torch.zeros(4, 8))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        self.cache.add_(x)
        return self.cache * 2


@pytest.mark.parametrize("take_over", [True, False])
def test_mutable_buffers_taken_over_only_when_asked(take_over):
    program = torch.export.export(Stateful().eval(), (torch.ones(4, 8),))
    options = CoreMLCompileOptions(minimum_deployment_target="iOS18")
    manager = to_edge_transform_and_lower(
        program,
        partitioner=[CoreMLPartitioner(compile_specs=options, take_over_mutable_buffer=take_over)],
    )
    mutated = manager.exported_program().graph_signature.buffers_to_mutate
    assert (len(mutated) == 0) is take_over
