"""ExecuTorch's LLM export inside lowerkit's scopes gives stock's bytes.

A CI-sized Llama-3-shaped decoder (`bench.llm_flows`'s ``llama_ci``: grouped-query attention, KV
cache, static shapes, a seeded checkpoint) is exported by ``export_llama`` as a user calls it,
stock and inside lowerkit's scopes, in the same run (nothing is compared with recorded bytes):

* Arm (TOSA-1.0+INT, 8a8w): the same ``.pte`` bytes, both in this process (Ethos-U, TOSA FP and
  the larger models are the benchmark's: ``python -m bench.llm``; each Arm case costs a minute here);
* Core ML (fp16, c4w weights; iOS 18): stock in a worker process of its own (the two Core ML
  backends cannot share one: ``bench.llm``'s worker), lowerkit here inside
  ``accelerated_coreml_llm_export()``: the same canonical Core ML payload.

Every ``run_decompositions`` on the way stays local (no whole-program re-trace): export's own,
functionalizing the training IR's in-place writes of the cache buffers, and the later ones on the
functional program that returns the cache's new values. On the Core ML fp16 export, each gives
what torch's own re-trace of the same program gives (compared when made), and the builder's
re-export of its unchanged module, made without a trace, what torch's strict re-export gives.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import torch
from torch.nn.attention import SDPBackend

from bench import llm as llm_benchmark  # its worker runs stock (imported: the sandbox holds it)
from bench.llm_flows import COREML_TARGETS, export, overrides
from bench.realworld_flows import Lowered
from lowerkit.cli.app import main
from lowerkit.cli.llm import dotlist
from lowerkit.pass_infra import _upstream, decomposition_fallbacks
from lowerkit.pass_infra.accelerations import reexport, retrace_skip
from lowerkit.pass_infra.accelerations.patching import suspend_all
from pass_infra.test_retrace_skip import _assert_same

MODEL = "llama_ci"
ARM_TARGETS = ("tosa-int",)
CORE_ML_TARGETS = ("coreml-fp16", "coreml-c4w")
@pytest.fixture(scope="module")
def stock_arm() -> dict[str, Lowered]:
    """Stock ``export_llama`` per Arm target."""
    return {target: export("stock", MODEL, target) for target in ARM_TARGETS}


@pytest.mark.parametrize("target", ARM_TARGETS)
def test_arm_same_pte_as_stock(target: str, stock_arm: dict[str, Lowered]) -> None:
    stock = stock_arm[target]
    with decomposition_fallbacks() as fallbacks:
        fast = export("dropin", MODEL, target)
    assert stock.payloads and stock.pte
    assert fast.payloads == stock.payloads
    assert fast.pte == stock.pte
    assert fallbacks == []


def test_each_local_decomposition_gives_what_torchs_retrace_gives(monkeypatch: pytest.MonkeyPatch) -> None:
    """Each program ``export_llama``'s ``run_decompositions`` calls give inside the scopes (Core ML
    fp16: export's own, the lowering's two; the re-export's is not made, see the next test) is
    compared, when made (later passes edit it in place), with torch's own re-trace of the same
    program: graph code, names, metadata, signature, weights, module call graph."""
    compared: list[int] = []
    local = retrace_skip.decompose_locally

    def compared_with_torch(program: Any, table: Any, decomposing: list[Any]) -> Any:
        result = local(program, table, decomposing)
        if result is not None:
            _assert_same(_upstream.STOCK_RUN_DECOMPOSITIONS(program, table), result)
            compared.append(len(decomposing))
        return result

    monkeypatch.setattr(retrace_skip, "decompose_locally", compared_with_torch)
    with decomposition_fallbacks() as fallbacks:
        export("dropin", MODEL, "coreml-fp16")
    assert fallbacks == []
    assert len(compared) == 3 and compared[0] > 0  # export's own re-traces its `to` calls


def test_the_builders_reexport_is_torchs(monkeypatch: pytest.MonkeyPatch) -> None:
    """Inside the scopes (Core ML fp16) ``LLMEdgeManager`` re-exports the module its first export
    made without a trace (`reexport`): compared, when made, with torch's strict re-export of that
    module as the builder makes it (``no_grad``, the math SDPA kernel, ``run_decompositions({})``):
    graph code, names, metadata, signature, weights, constants, module call graph."""
    made: list[Any] = []
    ours = reexport.reexported

    def compared_with_torch(module: Any, args: Any, kwargs: Any, dynamic_shapes: Any) -> Any:
        program = ours(module, args, kwargs, dynamic_shapes)
        if program is not None:
            with suspend_all(), torch.nn.attention.sdpa_kernel([SDPBackend.MATH]), torch.no_grad():
                stock = torch.export.export(module, args, kwargs=kwargs, strict=True).run_decompositions({})
            _assert_same(stock, program)
            assert list(program.constants) == list(stock.constants)
            assert all(program.constants[k] is stock.constants[k] for k in stock.constants)
            assert str(program.example_inputs) == str(stock.example_inputs)
            assert program.range_constraints == stock.range_constraints == {}
            made.append(program)
        return program

    monkeypatch.setattr(reexport, "reexported", compared_with_torch)
    export("dropin", MODEL, "coreml-fp16")
    assert len(made) == 1


def _stock_in_a_worker(target: str, out: Path) -> dict[str, object]:
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(p for p in sys.path if p)}
    command = [sys.executable, "-m", llm_benchmark.__name__, "--worker", "stock", MODEL, target, str(out)]
    done = subprocess.run(command, env=env, check=False, capture_output=True, text=True, timeout=900)
    assert done.returncode == 0, done.stderr[-3000:]
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
    assert fallbacks == []


def _lowerkit_llm(target: str, output: Path, *extra: str) -> None:
    main(args=["llm", *dotlist(overrides(MODEL, target, output)), "-q", *extra], standalone_mode=False)


def test_the_llm_command_writes_stocks_pte_and_serves_it_from_the_cache(
    stock_arm: dict[str, Lowered], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``lowerkit llm`` with export_llm's overrides writes stock's .pte where stock writes it; a
    second export elsewhere is served from the cache (the key ignores where it writes)."""
    monkeypatch.setenv("LOWERKIT_CACHE_DIR", str(tmp_path / "cache"))
    first, second = tmp_path / "a" / "model.pte", tmp_path / "b" / "model.pte"
    _lowerkit_llm("tosa-int", first)
    assert first.read_bytes() == stock_arm["tosa-int"].pte
    assert sorted(p.name for p in first.parent.iterdir()) == ["model.pte"]  # nothing half-written left
    entries = list((tmp_path / "cache").rglob("*"))
    _lowerkit_llm("tosa-int", second)
    assert second.read_bytes() == first.read_bytes()
    assert list((tmp_path / "cache").rglob("*")) == entries  # a hit stores nothing new


def test_the_llm_command_names_a_bad_override() -> None:
    from lowerkit.cli.errors import UsageError

    with pytest.raises(UsageError, match="Key 'enabeld' not in 'CoreMLConfig'"):
        main(args=["llm", "backend.coreml.enabeld=true"], standalone_mode=False)
