"""ExecuTorch's LLM export inside lowerkit's scopes gives stock's bytes.

A CI-sized Llama-3-shaped decoder (`bench.llm_flows`'s ``llama_ci``: grouped-query attention, KV
cache, static shapes, a seeded checkpoint) is exported by ``export_llama`` as a user calls it,
stock and inside lowerkit's scopes, in the same run (nothing is compared with recorded bytes):

* Arm (TOSA-1.0+INT, 8a8w): the same ``.pte`` bytes, both in this process (Ethos-U, TOSA FP and
  the larger models are the benchmark's: ``python -m bench.llm``; each Arm case costs a minute here);
* Core ML (fp16, c4w weights; iOS 18): stock in a worker process of its own (the two Core ML
  backends cannot share one: ``bench.llm``'s worker), lowerkit here inside
  ``accelerated_coreml_llm_export()``: the same canonical Core ML payload.

Only export's own ``run_decompositions`` of the training IR (in-place writes to the cache
buffers) may take torch's whole re-trace; every later one, on the functional program that
returns the cache's new values, is local.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from bench.llm_flows import COREML_TARGETS, export
from lowerkit.pass_infra import decomposition_fallbacks

MODEL = "llama_ci"
ARM_TARGETS = ("tosa-int",)
CORE_ML_TARGETS = ("coreml-fp16", "coreml-c4w")
#: What export's training IR holds that its run_decompositions functionalizes with torch's re-trace.
TRAINING_IR = "mutates an input"


def _local_but_training_ir(reasons: list[str]) -> None:
    assert reasons, "export_llama's training IR no longer takes torch's re-trace: update this test"
    assert all(TRAINING_IR in reason for reason in reasons), reasons


@pytest.mark.parametrize("target", ARM_TARGETS)
def test_arm_same_pte_as_stock(target: str) -> None:
    stock = export("stock", MODEL, target)
    with decomposition_fallbacks() as fallbacks:
        fast = export("dropin", MODEL, target)
    assert stock.payloads and stock.pte
    assert fast.payloads == stock.payloads
    assert fast.pte == stock.pte
    _local_but_training_ir([f.reason for f in fallbacks])


def _stock_in_a_worker(target: str, out: Path) -> dict[str, object]:
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(p for p in sys.path if p)}
    command = [sys.executable, "-m", "bench.llm", "--worker", "stock", MODEL, target, str(out)]
    subprocess.run(command, env=env, check=True, capture_output=True, timeout=900)
    record: dict[str, object] = json.loads(out.read_text())
    assert record["ok"], record.get("traceback")
    return record


@pytest.mark.parametrize("target", CORE_ML_TARGETS)
def test_coreml_same_canonical_payload_as_stock(target: str, tmp_path: Path) -> None:
    assert target in COREML_TARGETS
    stock = _stock_in_a_worker(target, tmp_path / "stock.json")
    with decomposition_fallbacks() as fallbacks:
        fast = export("dropin", MODEL, target)
    assert fast.payloads
    assert fast.payload_digests() == stock["payload_digests"]
    _local_but_training_ir([f.reason for f in fallbacks])
