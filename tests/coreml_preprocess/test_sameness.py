"""lowerkit's Core ML payloads hold the same Core ML model as ExecuTorch's, for the zoo.

ExecuTorch's side runs in its own process (``conftest.py`` as a script): the two backends share
the backend id ``CoreMLBackend`` and refuse to share a process. Both sides lower the same zoo
model with ``to_edge_transform_and_lower`` and their own ``CoreMLPartitioner``, with the same
options. Compared per delegate: backend id and compile specs; then in the payload the model spec
(serialized deterministically, without coremltools' conversion date and lowerkit's pipeline
record), the weight files, the debug files, the metadata other than the identifier, and the
package manifest other than its item identifiers.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from collections import Counter
from pathlib import Path
from typing import Any

import coremltools as ct
import pytest
import torch
from executorch.exir import to_edge_transform_and_lower
from executorch.exir.backend.compile_spec_schema import CompileSpec
from executorch.exir.lowered_backend_module import LoweredBackendModule

from lowerkit import zoo
from lowerkit.coreml_preprocess import (
    PIPELINE_METADATA_KEY,
    CoreMLCompileOptions,
    CoreMLPartitioner,
    _upstream_faster_conversion,
    files_of,
    unflatten_payload,
)
from lowerkit.pass_infra import accelerated_lowering

SPEC = "model.mlpackage/Data/com.apple.CoreML/model.mlmodel"
CONVERSION_DATE = "com.github.apple.coremltools.conversion_date"
INT8 = {"mode": "linear_symmetric", "dtype": "int8", "granularity": "per_channel"}
INT4 = {"mode": "linear_symmetric", "dtype": "int4", "granularity": "per_block", "block_size": 32}
NO_BN_FUSION = "no-batchnorm-fusion"  # conftest.py's name for this pass list
BN_FUSION_PASSES = ("common::fuse_conv_batchnorm", "common::fuse_elementwise_to_batchnorm")

CASES: list[dict[str, Any]] = [
    *(
        {"name": f"{m}-default", "model": m, "options": None}
        for m in ("conv_linear", "cnn9_layernorm", "resnet8", "mobilenet_v1_025", "ds_cnn", "tiny_lm")
    ),
    {
        "name": "resnet8-cpu-ios18-fp32",
        "model": "resnet8",
        "options": {
            "compute_unit": "CPU_ONLY",
            "minimum_deployment_target": "iOS18",
            "compute_precision": "float32",
        },
    },
    {"name": "resnet8-no-bn-fusion", "model": "resnet8", "options": {"pass_names": NO_BN_FUSION}},
    {
        "name": "tiny_lm-int8",
        "model": "tiny_lm",
        "options": {"minimum_deployment_target": "iOS17", "op_linear_quantizer_config": INT8},
    },
    {
        "name": "tiny_lm-int4-block32",
        "model": "tiny_lm",
        "options": {"minimum_deployment_target": "iOS18", "op_linear_quantizer_config": INT4},
    },
]
CASE_BY_NAME = {case["name"]: case for case in CASES}


def lowerkit_options(options: dict[str, Any] | None) -> CoreMLCompileOptions | None:
    """The lowerkit options matching a case's ExecuTorch ``generate_compile_specs`` arguments."""
    if options is None:
        return None
    kwargs = dict(options)
    if "pass_names" in kwargs:
        names = kwargs.pop("pass_names")
        if names == NO_BN_FUSION:
            names = [p for p in ct.PassPipeline.DEFAULT.passes if p not in BN_FUSION_PASSES]
        kwargs["pass_pipeline"] = names
    return CoreMLCompileOptions(**kwargs)


@pytest.fixture(scope="module")
def executorch_out(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """ExecuTorch's delegates for every case, lowered by ``conftest.py`` in its own process."""
    work = tmp_path_factory.mktemp("coreml_sameness")
    (work / "cases.json").write_text(json.dumps(CASES))
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(p for p in sys.path if p)}
    script = Path(__file__).with_name("conftest.py")
    done = subprocess.run(
        [sys.executable, str(script), str(work / "cases.json"), str(work / "executorch")],
        capture_output=True,
        text=True,
        env=env,
        check=False,
    )
    assert done.returncode == 0, f"ExecuTorch's side failed:\n{done.stdout[-3000:]}\n{done.stderr[-6000:]}"
    return work / "executorch"


def lower_with_lowerkit(case: dict[str, Any]) -> list[LoweredBackendModule]:
    model = zoo.get(case["model"])
    program = torch.export.export(model.module(), model.example_inputs())
    options = lowerkit_options(case["options"])
    specs = None if options is None else options.to_compile_specs()
    with accelerated_lowering():  # as lower_to_coreml runs it
        manager = to_edge_transform_and_lower(program, partitioner=[CoreMLPartitioner(compile_specs=specs)])
    module = manager.exported_program().graph_module
    return [m for _, m in module.named_children() if isinstance(m, LoweredBackendModule)]


def canonical_spec(data: bytes) -> tuple[bytes, dict[str, str]]:
    """The spec serialized deterministically without the date and lowerkit's record; the removed."""
    spec = ct.proto.Model_pb2.Model()
    spec.ParseFromString(data)
    metadata = spec.description.metadata.userDefined
    removed = {}
    for key in (CONVERSION_DATE, PIPELINE_METADATA_KEY):
        if key in metadata:
            removed[key] = metadata[key]
            del metadata[key]
    return spec.SerializeToString(deterministic=True), removed


def op_types(data: bytes) -> dict[str, str]:
    """``{output name: op type}`` over every block of the spec's ML program."""
    spec = ct.proto.Model_pb2.Model()
    spec.ParseFromString(data)
    result: dict[str, str] = {}

    def walk(block: Any) -> None:
        for op in block.operations:
            for output in op.outputs:
                result[output.name] = op.type
            for nested in op.blocks:
                walk(nested)

    for function in spec.mlProgram.functions.values():
        for block in function.block_specializations.values():
            walk(block)
    return result


def gather_tables(data: bytes) -> list[str]:
    """The op type producing each gather's table (``const`` or a ``constexpr_*``)."""
    spec = ct.proto.Model_pb2.Model()
    spec.ParseFromString(data)
    types = op_types(data)
    tables = []
    for function in spec.mlProgram.functions.values():
        for block in function.block_specializations.values():
            for op in block.operations:
                if op.type == "gather":
                    tables.append(types[op.inputs["x"].arguments[0].name])
    return tables


def without_ids(manifest: bytes) -> Any:
    data = json.loads(manifest)
    return sorted(json.dumps(v, sort_keys=True) for v in data["itemInfoEntries"].values())


def counting_walk_skips(monkeypatch: pytest.MonkeyPatch) -> Counter[bool]:
    """Counts ``faster_conversion``'s decisions: True, coremltools' var walk skipped; False, run."""
    decisions: Counter[bool] = Counter()
    check = _upstream_faster_conversion.nothing_to_propagate

    def counted(block: Any) -> bool:
        skip = check(block)
        decisions[skip] += 1
        return skip

    monkeypatch.setattr(_upstream_faster_conversion, "nothing_to_propagate", counted)
    return decisions


@pytest.mark.parametrize("name", list(CASE_BY_NAME))
def test_same_core_ml_model_as_executorch(
    name: str, executorch_out: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    case = CASE_BY_NAME[name]
    decisions = counting_walk_skips(monkeypatch)
    ours = lower_with_lowerkit(case)
    # The same model as ExecuTorch's through both paths of faster_conversion: the var walk
    # skipped while the program has no compressed weight, run once weights are compressed.
    assert decisions[True] > 0
    compressed = case["options"] is not None and "op_linear_quantizer_config" in case["options"]
    assert (decisions[False] > 0) == compressed
    theirs = json.loads((executorch_out / f"{name}.json").read_text())
    assert len(ours) == len(theirs) >= 1
    for index, (module, record) in enumerate(zip(ours, theirs, strict=True)):
        assert module.backend_id == record["backend_id"] == "CoreMLBackend"
        assert [[s.key, bytes(s.value).decode()] for s in module.compile_specs] == record["compile_specs"]
        mine = files_of(unflatten_payload(module.processed_bytes)[1])
        upstream = files_of(unflatten_payload((executorch_out / f"{name}.{index}.payload").read_bytes())[1])
        assert sorted(mine) == sorted(upstream)
        spec_mine, removed = canonical_spec(mine[SPEC])
        spec_upstream, _ = canonical_spec(upstream[SPEC])
        assert spec_mine == spec_upstream
        assert (CONVERSION_DATE in removed) == bool(os.environ.get("SOURCE_DATE_EPOCH"))
        options = lowerkit_options(case["options"])
        if options is not None and options.pass_pipeline != "default":
            assert removed[PIPELINE_METADATA_KEY] == options.mil_pass_pipeline.provenance()
        else:
            assert PIPELINE_METADATA_KEY not in removed
        for path in mine:
            if path.endswith((".bin", ".json")) and path not in ("metadata.json", "model.mlpackage/Manifest.json"):
                assert mine[path] == upstream[path], path
        meta_mine, meta_upstream = json.loads(mine["metadata.json"]), json.loads(upstream["metadata.json"])
        assert re.fullmatch(r"executorch_[0-9a-f-]{36}", meta_mine.pop("identifier"))
        meta_upstream.pop("identifier")
        assert meta_mine == meta_upstream
        assert without_ids(mine["model.mlpackage/Manifest.json"]) == without_ids(
            upstream["model.mlpackage/Manifest.json"]
        )


def test_batchnorm_fusion_follows_the_pipeline(executorch_out: Path) -> None:
    fused = files_of(unflatten_payload((executorch_out / "resnet8-default.0.payload").read_bytes())[1])
    ours = lower_with_lowerkit(CASE_BY_NAME["resnet8-no-bn-fusion"])
    unfused = files_of(unflatten_payload(ours[0].processed_bytes)[1])
    norms = sum(isinstance(m, torch.nn.BatchNorm2d) for m in zoo.get("resnet8").module().modules())
    assert norms == 9
    assert "batch_norm" not in op_types(fused[SPEC]).values()
    assert list(op_types(unfused[SPEC]).values()).count("batch_norm") == norms


@pytest.mark.parametrize(
    ("name", "table"),
    [
        ("tiny_lm-default", "const"),
        ("tiny_lm-int8", "constexpr_affine_dequantize"),
        ("tiny_lm-int4-block32", "constexpr_blockwise_shift_scale"),
    ],
)
def test_tied_table_compressed_exactly_when_asked(name: str, table: str, executorch_out: Path) -> None:
    payload = (executorch_out / f"{name}.0.payload").read_bytes()
    assert gather_tables(files_of(unflatten_payload(payload)[1])[SPEC]) == [table]


def test_misspelt_pass_fails_before_conversion(monkeypatch: pytest.MonkeyPatch) -> None:
    from lowerkit.coreml_preprocess import PassPipelineError

    def no_conversion(*args: Any, **kwargs: Any) -> Any:
        raise AssertionError("ct.convert must not run")

    monkeypatch.setattr(ct, "convert", no_conversion)
    model = zoo.get("resnet8")
    program = torch.export.export(model.module(), model.example_inputs())
    specs = [CompileSpec("pass_pipeline", b'["common::fuse_conv_batchnorm", "common::dead_code_elimnation"]')]
    with pytest.raises(PassPipelineError, match="Did you mean 'common::dead_code_elimination'"):
        to_edge_transform_and_lower(program, partitioner=[CoreMLPartitioner(compile_specs=specs)])
