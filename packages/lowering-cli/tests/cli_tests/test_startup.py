"""Start-up: each command imports only what it needs (issue 12, item 4).

Each test runs `lowerkit` in a fresh interpreter and checks which modules it had loaded when
it finished: `--help`, `targets` and `zoo` load neither torch nor ExecuTorch, `inspect` loads
coremltools only to decode Core ML weights, and a lowering loads only its own backend.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

#: Runs the CLI with argv[2:], then writes the names of the loaded modules to argv[1].
_RUN = """
import json, sys
from lowerkit.cli.entry import run
try:
    run(sys.argv[2:])
finally:
    with open(sys.argv[1], "w") as out:
        json.dump(sorted(sys.modules), out)
"""

ARM_STACK = (
    "executorch.backends.arm",
    "tosa",
    "tosa_serializer",
    "tosa_reference_model",
    "tosa_tools",
    "ethosu",
    "lowerkit.arm_passes",
)
COREML_STACK = (
    "coremltools",
    "executorch.backends.apple",
    "lowerkit.coreml_preprocess",
    "lowerkit.coreml_quantizer",
    "lowerkit.coreml_compiler_ops",
)
#: pass-infra's sub-packages that lower something (its shared helpers, `suggest` and `files`, are light).
PASS_INFRA_ENGINE = tuple(f"lowerkit.pass_infra.{m}" for m in ("accelerations", "framework", "numerics", "_upstream"))
#: What a command that lowers nothing must not load.
HEAVY = ("torch", "executorch", "torchao", "numpy", *PASS_INFRA_ENGINE, "lowerkit.zoo.registry", *ARM_STACK, *COREML_STACK)


def run_cli(folder: Path, *args: str) -> tuple[str, set[str]]:
    """Run `lowerkit ARGS` in a fresh interpreter: its stdout and the modules it loaded."""
    modules = folder / "modules.json"
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(p for p in sys.path if p)}
    done = subprocess.run(
        [sys.executable, "-c", _RUN, str(modules), *args],
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    return done.stdout, set(json.loads(modules.read_text()))


def loaded(modules: set[str], packages: tuple[str, ...]) -> list[str]:
    """The modules in `modules` that are (in) one of `packages`."""
    return sorted(m for m in modules if any(m == p or m.startswith(p + ".") for p in packages))


@pytest.mark.parametrize("args", [["--help"], ["targets"], ["targets", "--json"], ["zoo"], ["zoo", "--json"]], ids=" ".join)
def test_listing_commands_import_neither_torch_nor_executorch(tmp_path, args):
    out, modules = run_cli(tmp_path, *args)
    assert out
    assert loaded(modules, HEAVY) == []


@pytest.fixture(scope="module")
def lowered(tmp_path_factory: pytest.TempPathFactory) -> dict[str, tuple[Path, set[str]]]:
    """conv_linear lowered (and verified) to Core ML int8 and TOSA INT: the .pte and the modules loaded."""
    results = {}
    for target in ("coreml-int8", "tosa-int"):
        folder = tmp_path_factory.mktemp(target)
        pte = folder / "conv_linear.pte"
        _, modules = run_cli(folder, "lower", "zoo:conv_linear", "-t", target, "-o", str(pte), "--verify", "-q")
        results[target] = (pte, modules)
    return results


def test_a_core_ml_lowering_never_imports_the_arm_stack(lowered):
    _, modules = lowered["coreml-int8"]
    assert loaded(modules, ("coremltools", "lowerkit.coreml_preprocess")), "the check must see the Core ML stack"
    assert loaded(modules, ARM_STACK) == []


def test_an_arm_lowering_never_imports_coremltools(lowered):
    _, modules = lowered["tosa-int"]
    assert loaded(modules, ("executorch.backends.arm", "lowerkit.arm_passes")), "the check must see the Arm stack"
    assert loaded(modules, COREML_STACK) == []


@pytest.mark.parametrize(
    ("target", "options"), [("tosa-int", []), ("coreml-int8", ["--no-weights"]), ("tosa-int", ["--json"])]
)
def test_inspect_reads_a_pte_without_torch_or_executorch(lowered, tmp_path, target, options):
    pte, _ = lowered[target]
    out, modules = run_cli(tmp_path, "inspect", str(pte), *options)
    assert "TOSABackend" in out or "CoreMLBackend" in out
    assert loaded(modules, HEAVY) == []


def test_inspect_loads_coremltools_only_for_core_ml_weights(lowered, tmp_path):
    pte, _ = lowered["coreml-int8"]
    out, modules = run_cli(tmp_path, "inspect", str(pte))
    assert "compressed weights: constexpr_" in out
    assert loaded(modules, ARM_STACK) == []


def test_the_pte_reader_agrees_with_executorchs(lowered):
    from lowerkit.cli._upstream import deserialize_pte
    from lowerkit.cli.pte_file import read_plans

    for pte, _ in lowered.values():
        data = pte.read_bytes()
        program = deserialize_pte(data).program  # segments restored: every payload inline
        plans = read_plans(data)
        assert [p.name for p in plans] == [p.name for p in program.execution_plan]
        for plan, upstream in zip(plans, program.execution_plan, strict=True):
            assert (plan.inputs, plan.outputs) == (len(upstream.inputs), len(upstream.outputs))
            assert plan.operators == [(op.name, op.overload) for op in upstream.operators]
            assert len(plan.delegates) == len(upstream.delegates) > 0
            for delegate, theirs in zip(plan.delegates, upstream.delegates, strict=True):
                assert delegate.backend_id == theirs.id
                assert delegate.compile_specs == [(s.key, bytes(s.value)) for s in theirs.compile_specs]
                assert delegate.payload == bytes(program.backend_delegate_data[theirs.processed.index].data)


def test_compare_of_two_ptes_imports_neither_torch_nor_executorch(lowered, tmp_path):
    tosa, _ = lowered["tosa-int"]
    coreml, _ = lowered["coreml-int8"]
    out, modules = run_cli(tmp_path, "compare", str(tosa), str(coreml))
    assert "the programs differ" in out and "TOSABackend" in out
    assert loaded(modules, HEAVY) == []


def test_a_command_line_runs_under_one_hash_seed() -> None:
    """The console entry starts again under PYTHONHASHSEED=0 (stock's Arm .pte can depend on it)."""
    code = (
        "import sys; print(hash('lowerkit'), flush=True); sys.argv = ['lowerkit', '--help']\n"
        "from lowerkit.cli.entry import run; run()"
    )
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(p for p in sys.path if p), "PYTHONHASHSEED": "random"}
    done = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=120, check=True)
    seeded = subprocess.run(
        [sys.executable, "-c", "print(hash('lowerkit'))"], env={**env, "PYTHONHASHSEED": "0"},
        capture_output=True, text=True, timeout=60, check=True,
    )  # fmt: skip
    before, after, *rest = done.stdout.splitlines()
    assert after == seeded.stdout.strip() != before  # the second start ran under seed 0
    assert any(line.startswith("Usage: lowerkit") for line in rest)


def test_an_llm_export_served_by_the_cache_imports_no_torch(tmp_path, monkeypatch):
    """`lowerkit llm` reads LlmConfig without the torch ExecuTorch's package imports; a hit then
    writes the stored files, and the key is the one ExecuTorch's own LlmConfig gives."""
    from lowerkit.cli import llm
    from lowerkit.cli.cache.cached import CacheSettings, store
    from lowerkit.cli.cache.entry import Entry
    from lowerkit.cli.cache.store import LocalStore

    monkeypatch.setenv("LOWERKIT_CACHE_DIR", str(tmp_path / "cache"))
    pte = tmp_path / "out" / "model.pte"
    overrides = ["backend.tosa.enabled=true", "quantization.pt2e_quantize=tosa_8a8w", f"export.output_name={pte}"]
    light, real = llm.llm_config(None, overrides, light=True), llm.llm_config(None, overrides)
    assert type(light).__module__ != type(real).__module__  # the check must compare two classes
    assert llm.cache_key(light) == llm.cache_key(real)
    store(Entry(key=llm.cache_key(real), summary={"pte": "model.pte"}, blobs={llm.PTE: b"stored program"}),
          CacheSettings(local=LocalStore(tmp_path / "cache")))  # fmt: skip
    out, modules = run_cli(tmp_path, "llm", *overrides)
    assert "(cache hit)" in out
    assert pte.read_bytes() == b"stored program"
    assert loaded(modules, ("torch", "torchao", "executorch.extension.llm.export", "executorch.examples")) == []
