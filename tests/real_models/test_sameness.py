"""lowerkit gives the same bytes as stock ExecuTorch on real models (a CNN, a transformer, an LSTM,
timm's attention).

The models are the benchmark corpus's (`bench.corpus`: ``tv:resnet18`` at 64x64, ``hf:bert_tiny``
from its ``save_pretrained`` folder, ``et:lstm``, timm's DeiT-tiny with two blocks from its
TimmWrapper folder), lowered here, now, by ExecuTorch's public-API flow and by lowerkit
(`bench.realworld_flows`, the benchmark's own flows); nothing is compared with recorded bytes.
Arm (TOSA-1.0+INT): stock vs ``lower_to_arm`` on every model, and vs the drop-in scopes on
DeiT (whose ``qkv.unbind(0)`` lost stock's bytes once, unseen by the HF models' eager
attention): the same TOSA flatbuffers and ``.pte`` bytes. (The drop-in accelerators around ExecuTorch's public flow are
compared with stock on a transformer in tests/arm/test_transformer_sameness.py, on a Llama-2l
decoder (TOSA-1.0+FP, a nested graph) here, and on every case by the benchmark.) Core ML (fp16, int8): stock runs in
its own process (``real_models.coreml_stock``: the two Core ML backends cannot share one);
lowerkit's payloads hold the same canonical Core ML model (spec, weights, metadata but the
identifier, manifest but the item ids). Each lowering is done once per module (fixtures).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from bench.corpus import load
from bench.realworld_flows import Lowered, lower
from lowerkit.pass_infra import decomposition_fallbacks
from real_models.cases import CI_MODELS, ci_model
from real_models.coreml_stock import canonical_files

MODELS = list(CI_MODELS)
ARM_TARGET = "TOSA-1.0+INT"
#: (model, lowerkit side) pairs compared with stock on Arm.
ARM_CASES = [(m, "api") for m in MODELS] + [("hf:deit_2l_timm", "dropin")]
#: Core ML cases: fp16 on every model, static int8 on the CNN.
COREML_CASES = [(m, "coreml-fp16") for m in MODELS] + [("tv:resnet18", "coreml-int8")]


@pytest.fixture(scope="module")
def arm_lowerings() -> dict[tuple[str, str], Lowered]:
    """(model, side) -> its TOSA INT lowering: stock, and each side of `ARM_CASES`."""
    results = {}
    for name, side in [(m, "stock") for m in MODELS] + ARM_CASES:
        model = ci_model(name)
        results[name, side] = lower(side, model.module, model.example_inputs, ARM_TARGET, model.calibration)
    return results


@pytest.mark.parametrize(("name", "side"), ARM_CASES, ids=lambda v: str(v))
def test_arm_same_tosa_and_pte_as_stock(name: str, side: str, arm_lowerings: dict[tuple[str, str], Lowered]) -> None:
    stock, fast = arm_lowerings[name, "stock"], arm_lowerings[name, side]
    assert stock.payloads and stock.pte
    assert fast.payloads == stock.payloads  # the TOSA flatbuffers
    assert fast.pte == stock.pte


def test_a_decoder_with_nested_graphs_lowers_to_stocks_bytes_through_the_drop_in_scopes() -> None:
    """Llama-2l (its ``@torch.no_grad()`` rotary embedding exports to a nested graph, which
    ``run_decompositions`` inlines locally), TOSA-1.0+FP: the drop-in accelerators around
    ExecuTorch's public flow give stock's bytes, with no whole-program re-trace. A change that
    vouched for ``Graph.node_copy`` copies once broke exactly this case."""
    model = load("hf:llama_2l")
    stock = lower("stock", model.module, model.example_inputs, "TOSA-1.0+FP", model.calibration)
    with decomposition_fallbacks() as fallbacks:
        fast = lower("dropin", model.module, model.example_inputs, "TOSA-1.0+FP", model.calibration)
    assert fallbacks == []
    assert stock.payloads and stock.pte
    assert fast.payloads == stock.payloads
    assert fast.pte == stock.pte


@pytest.fixture(scope="module")
def coreml_stock(tmp_path_factory: pytest.TempPathFactory) -> dict[str, list[dict[str, str]]]:
    """ExecuTorch's canonical Core ML payloads per case, lowered in a process of its own."""
    work = tmp_path_factory.mktemp("real_models_coreml")
    (work / "cases.json").write_text(json.dumps(COREML_CASES))
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(p for p in sys.path if p)}
    done = subprocess.run(
        [sys.executable, "-m", "real_models.coreml_stock", str(work / "cases.json"), str(work / "out.json")],
        capture_output=True, text=True, env=env, check=False,
    )  # fmt: skip
    assert done.returncode == 0, f"ExecuTorch's side failed:\n{done.stdout[-3000:]}\n{done.stderr[-6000:]}"
    result: dict[str, list[dict[str, str]]] = json.loads((work / "out.json").read_text())
    return result


@pytest.mark.parametrize(("name", "target"), COREML_CASES, ids=lambda v: str(v))
def test_coreml_same_canonical_payload_as_stock(
    name: str, target: str, coreml_stock: dict[str, list[dict[str, str]]]
) -> None:
    model = ci_model(name)
    ours = lower("api", model.module, model.example_inputs, target, model.calibration)
    theirs = coreml_stock[f"{name} {target}"]
    assert len(theirs) >= 1
    mine = canonical_files(ours.payloads)
    assert len(mine) == len(theirs)
    for files, upstream in zip(mine, theirs, strict=True):
        assert any(f.endswith(".mlmodel") for f in files) and any(f.endswith(".bin") for f in files)
        assert sorted(files) == sorted(upstream)
        for file_name, digest in files.items():
            assert digest == upstream[file_name], file_name


def test_shim_is_not_applied_by_lowerkit() -> None:
    """Importing lowerkit defines no torchvision op (the shim is the harness's alone)."""
    code = (
        "import torch, lowerkit.arm_passes, lowerkit.pass_infra;"
        "print(hasattr(torch.ops.torchvision, 'nms'))"
    )
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(p for p in sys.path if p)}
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, check=True)
    assert done.stdout.strip().splitlines()[-1] == "False"
