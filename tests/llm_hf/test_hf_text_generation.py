"""``lowerkit lower hf:DIR --task text-generation``: a Hugging Face decoder folder becomes a program that
generates, and its lowering is stock ExecuTorch's.

Tiny random folders, written by transformers' ``save_pretrained`` (2 layers, dim 64, grouped-query
attention, weights seeded and scaled up so that greedy decoding does not just repeat a token), one
per family lowerkit builds (`hf_llm.FAMILIES`):

* **Generation**: lowerkit's LLM path (ExecuTorch's converter, ``params_of``, ``export_llama`` with
  the KV cache and static shapes) with no backend (ExecuTorch's Core ML and Arm delegates do not
  run on Linux), run by ExecuTorch's runtime as its LLM runner runs it: prompt one token at a time,
  then each argmax fed back. The same 16 tokens as transformers' ``generate`` (greedy) on the folder.
* **Sameness**, on a one-layer Qwen 3 folder (the family whose ExecuTorch converter imports without
  torchtune): stock is what a user runs, in its own process: ExecuTorch's ``convert_weights`` and
  ``python -m executorch.extension.llm.export.export_llm`` with the settings written out here per
  target (`STOCK_SETTINGS`, independently of lowerkit's target table); lowerkit is ``lowerkit
  lower``. The same ``.pte`` bytes (Arm) or canonical Core ML payload (Core ML). Each case costs
  about a minute of one core, so CI runs one per backend path (`LIVE`: Core ML c4w, which is the
  fp16 path plus weight quantization, and pt2e 8a8w; TOSA INT; Ethos-U; VGF INT);
  ``LOWERKIT_LLM_ALL_TARGETS=1`` adds the other five (Core ML fp16 and b4w, TOSA FP, Ethos-U55, VGF
  FP), which differ only in the settings `test_lowerkit_sets_what_a_user_sets` checks for every target.
* **Prefill + decode** (``--prefill``, Core ML): stock's ``export_static_llm_coreml --multifunction``
  in its own process against ``lowerkit lower``, on the Llama folder.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import torch

from bench.realworld_flows import Lowered
from llm_export.runtime_greedy import greedy_with_the_runtime
from lowerkit.cli import llm
from lowerkit.cli.app import main
from lowerkit.cli.cache.cached import CacheSettings
from lowerkit.cli.errors import UsageError
from lowerkit.cli.progress import Steps
from lowerkit.cli.pte_file import read_plans
from lowerkit.cli.sources import hf_llm

PROMPT = [1, 7, 42, 99]
NEW_TOKENS = 16
MAX_SEQ_LEN = 64
_COMMON: dict[str, Any] = {
    "vocab_size": 512, "hidden_size": 64, "intermediate_size": 128, "num_hidden_layers": 2, "num_attention_heads": 4,
    "num_key_value_heads": 2, "max_position_embeddings": 128, "initializer_range": 0.3, "bos_token_id": 1, "eos_token_id": 2,
}  # fmt: skip
#: transformers config class and its own fields, per family (tied and untied embeddings both covered).
CONFIGS: dict[str, tuple[str, dict[str, Any]]] = {
    "llama": ("LlamaConfig", {"tie_word_embeddings": True, "rope_theta": 100000.0}),
    "qwen2": ("Qwen2Config", {}),
    "qwen3": ("Qwen3Config", {"head_dim": 16, "tie_word_embeddings": True}),
    "phi3": ("Phi3Config", {"partial_rotary_factor": 0.75, "pad_token_id": 0}),
}
#: The folder the sameness tests lower: Qwen 3 with one layer (stock's Arm pipeline costs a minute or more per case).
SAMENESS = "qwen3-1l"
_CORE_ML = ["backend.coreml.enabled=true", "backend.coreml.ios=18"]
#: export_llm's settings a user passes for each target (stock's side), and lowerkit's extra overrides.
STOCK_SETTINGS: dict[str, tuple[list[str], list[str]]] = {
    "coreml": (_CORE_ML, []),
    "coreml-c4w": ([*_CORE_ML, "backend.coreml.quantize=c4w"], ["backend.coreml.quantize=c4w"]),
    "coreml-w4": ([*_CORE_ML, "backend.coreml.quantize=b4w"], []),
    "coreml-int8": ([*_CORE_ML, "quantization.pt2e_quantize=coreml_8a_c8w"], []),
    "tosa-int": (["backend.tosa.enabled=true", "quantization.pt2e_quantize=tosa_8a8w"], []),
    "tosa-fp": (["backend.tosa.enabled=true", "backend.tosa.version=TOSA-1.0+FP"], []),
    "ethos-u55-128": (["backend.ethosu.enabled=true", "backend.ethosu.target=ethos-u55-128", "quantization.pt2e_quantize=ethosu_8a8w"], []),
    "ethos-u85-256": (["backend.ethosu.enabled=true", "backend.ethosu.target=ethos-u85-256", "quantization.pt2e_quantize=ethosu_8a8w"], []),
    "vgf-int": (["backend.vgf.enabled=true", "quantization.pt2e_quantize=vgf_8a8w"], []),
    "vgf-fp": (["backend.vgf.enabled=true", "backend.vgf.compile_spec=TOSA-1.0+FP"], []),
}  # fmt: skip
#: The targets CI exports live, stock and lowerkit (see the module docstring).
LIVE = ("coreml-c4w", "coreml-int8", "tosa-int", "ethos-u85-256", "vgf-int")
EXPORTED = tuple(STOCK_SETTINGS) if os.environ.get("LOWERKIT_LLM_ALL_TARGETS") == "1" else LIVE


@pytest.fixture(scope="module")
def folders(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """One save_pretrained folder per family, seeded."""
    from bench.torchvision_shim import ensure_torchvision_importable

    ensure_torchvision_importable()
    import transformers

    made = {}
    for family, (config_class, own) in (*CONFIGS.items(), (SAMENESS, (CONFIGS["qwen3"][0], {**CONFIGS["qwen3"][1], "num_hidden_layers": 1}))):
        config = getattr(transformers, config_class)(**{**_COMMON, **own})
        with torch.random.fork_rng():
            torch.manual_seed(0)
            model = transformers.AutoModelForCausalLM.from_config(config)
        made[family] = tmp_path_factory.mktemp(family)
        model.save_pretrained(made[family])
    return made


def _portable_program(folder: Path, output: Path) -> None:
    prepared = hf_llm.prepare(folder, keep=False)
    values = hf_llm.llm_values(prepared, {}, max_seq_len=MAX_SEQ_LEN, output=output)
    llm.export(llm.llm_config(None, llm.dotlist(values)), cache=CacheSettings(enabled=False), steps=Steps.for_terminal(quiet=True))


def _greedy_with_transformers(folder: Path) -> list[int]:
    import transformers

    model = transformers.AutoModelForCausalLM.from_pretrained(folder).eval()
    with torch.no_grad():
        out = model.generate(torch.tensor([PROMPT]), max_new_tokens=NEW_TOKENS, min_new_tokens=NEW_TOKENS, do_sample=False)
    return [int(t) for t in out[0, len(PROMPT) :]]


@pytest.mark.parametrize("family", CONFIGS)
def test_the_program_generates_what_transformers_generates(family: str, folders: dict[str, Path], tmp_path: Path) -> None:
    output = tmp_path / "model.pte"
    _portable_program(folders[family], output)
    generated, metadata = greedy_with_the_runtime(output.read_bytes(), PROMPT, NEW_TOKENS)
    assert generated == _greedy_with_transformers(folders[family])
    assert len(set(generated)) > 4  # not a degenerate repetition
    assert metadata["use_kv_cache"] is True and metadata["get_max_seq_len"] == MAX_SEQ_LEN
    assert metadata["get_n_layers"] == 2 and metadata["get_vocab_size"] == 512
    assert metadata["get_bos_id"] == 1 and metadata["get_eos_ids"] == 2  # from config.json


def _stock(folder: Path, target: str, tmp_path: Path) -> bytes:
    """What a user runs: ExecuTorch's converter, then export_llm, in a process of its own."""
    from executorch.examples.models.qwen3.convert_weights import convert_weights

    checkpoint, params, output = tmp_path / "stock.pth", tmp_path / "params.json", tmp_path / "stock.pte"
    convert_weights(str(folder), str(checkpoint))
    params.write_text(json.dumps(hf_llm.params_of(json.loads((folder / "config.json").read_text()), folder)))
    settings = [
        "base.model_class=qwen3_0_6b", f"base.checkpoint={checkpoint}", f"base.params={params}",
        """base.metadata='{"get_bos_id": 1, "get_eos_ids": [2]}'""",
        "model.use_kv_cache=true", "model.enable_dynamic_shape=false",
        f"export.max_seq_length={MAX_SEQ_LEN}", f"export.max_context_length={MAX_SEQ_LEN}",
        f"export.output_dir={tmp_path}", f"export.output_name={output}", *STOCK_SETTINGS[target][0],
    ]  # fmt: skip
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(p for p in sys.path if p)}
    if target.startswith("vgf"):  # where ExecuTorch's VGF backend looks for Arm's converter (its docs)
        from lowerkit.arm_passes.converter import packaged_model_converter

        env["MODEL_CONVERTER_PATH"] = str(packaged_model_converter())
    command = [sys.executable, "-m", "executorch.extension.llm.export.export_llm", *settings]
    done = subprocess.run(command, env=env, cwd=tmp_path, check=False, capture_output=True, text=True, timeout=900)
    assert done.returncode == 0, done.stderr[-3000:]
    return output.read_bytes()


def _lowered(pte: bytes, target: str) -> Lowered:
    payloads = [d.payload for plan in read_plans(pte) for d in plan.delegates]
    return Lowered(pte, payloads, "coreml" if target.startswith("coreml") else "arm")


@pytest.mark.parametrize("target", STOCK_SETTINGS)
def test_lowerkit_sets_what_a_user_sets(target: str) -> None:
    """For every target, the export_llm settings lowerkit's backend declares (and --llm-override adds)
    are those a user passes to stock."""
    from lowerkit.cli import targets

    cli_target = targets.get("coreml" if target == "coreml-c4w" else target)
    declared = targets.backend_of(cli_target).llm_overrides(cli_target)
    assert declared is not None
    user, extra = STOCK_SETTINGS[target]
    assert sorted([*llm.dotlist(declared), *extra]) == sorted(user)


@pytest.mark.parametrize("target", EXPORTED)
def test_lowerkit_lower_gives_stock_export_llms_program(
    target: str, folders: dict[str, Path], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    stock = _lowered(_stock(folders[SAMENESS], target, tmp_path), target)
    output = tmp_path / "lowerkit.pte"
    cli_target = "coreml" if target == "coreml-c4w" else target
    extra = [arg for override in STOCK_SETTINGS[target][1] for arg in ("--llm-override", override)]
    main(
        args=["lower", f"hf:{folders[SAMENESS]}", "--task", "text-generation", "-t", cli_target, "-o", str(output),
              "--max-seq-len", str(MAX_SEQ_LEN), "-q", "--no-cache", *extra],
        standalone_mode=False,
    )  # fmt: skip
    fast = _lowered(output.read_bytes(), target)
    # save_pretrained writes no tokenizer: the program builds, and the user is told the runner needs one.
    assert f"{folders[SAMENESS]} has no tokenizer.json or tokenizer.model" in capsys.readouterr().err
    assert stock.payloads and fast.payloads
    if target.startswith("coreml"):
        assert fast.payload_digests() == stock.payload_digests()
    else:
        assert fast.pte == stock.pte


def test_an_unsupported_architecture_names_those_that_build(tmp_path: Path) -> None:
    (tmp_path / "config.json").write_text(json.dumps({"model_type": "gpt2", "architectures": ["GPT2LMHeadModel"]}))
    with pytest.raises(UsageError, match=r"builds no 'gpt2' decoder; it builds: llama \(Llama 3.x, SmolLM2\), qwen2"):
        main(args=["lower", f"hf:{tmp_path}", "--task", "text-generation", "-t", "coreml", "-o", str(tmp_path / "m.pte")],
             standalone_mode=False)  # fmt: skip


def test_a_family_the_prefill_and_decode_export_cannot_build_is_one_line(folders: dict[str, Path], tmp_path: Path) -> None:
    with pytest.raises(UsageError, match="ExecuTorch's prefill \\+ decode export cannot build Qwen 3: it loads no q / k norm"):
        main(args=["lower", f"hf:{folders['qwen3']}", "--task", "text-generation", "-t", "coreml", "--prefill", "8",
                   "-o", str(tmp_path / "m.pte"), "--no-cache"], standalone_mode=False)  # fmt: skip


@pytest.mark.parametrize(
    ("arguments", "message"),
    [
        (["-t", "coreml-fp32"], "ExecuTorch's LLM export has no target like coreml-fp32; with --task text-generation use one of: coreml, coreml-int8"),
        (["-t", "tosa-int", "--verify"], "--verify does not apply to --task text-generation"),
        (["-t", "ethos-u55-128", "--a16w8"], "--a16w8 does not apply to --task text-generation"),
        (["-t", "tosa-int", "--prefill", "8"], "ExecuTorch builds prefill + decode methods for no target like tosa-int; with --prefill use one of: coreml, coreml-w4"),
        (["-t", "coreml", "--prefill", "128"], "--prefill 128 leaves no room in the KV cache: make it less than --max-seq-len (128)"),
    ],
)  # fmt: skip
def test_what_the_llm_export_cannot_do_is_one_line(arguments: list[str], message: str, folders: dict[str, Path], tmp_path: Path) -> None:
    with pytest.raises(UsageError, match=re.escape(message)):
        main(args=["lower", f"hf:{folders['llama']}", "--task", "text-generation", "-o", str(tmp_path / "m.pte"), *arguments],
             standalone_mode=False)  # fmt: skip


PREFILL, PREFILL_CONTEXT = 8, 32


def _static_export(checkpoint: Path, params: Path, output: Path) -> bytes:
    """Stock ExecuTorch's prefill + decode Core ML export as a user runs it (its own process)."""
    command = [
        sys.executable, "-m", "executorch.examples.apple.coreml.llama.export_static_llm_coreml",
        "--checkpoint", str(checkpoint), "--params", str(params), "--output", str(output),
        "--max_context_len", str(PREFILL_CONTEXT), "--input_len", str(PREFILL), "--multifunction", "--linear_quantize", "c4w",
    ]  # fmt: skip
    done = subprocess.run(command, cwd=output.parent, check=False, capture_output=True, text=True, timeout=900)
    assert done.returncode == 0, done.stderr[-3000:]
    return output.read_bytes()


def _methods(pte: bytes) -> tuple[list[tuple[Any, ...]], list[str], dict[str, Any]]:
    """(each method's shape and delegates, the canonical digest of each Core ML model it references,
    the values of the methods without delegates)."""
    from executorch.runtime import Runtime

    from bench.realworld_flows import canonical_payload_digest, referenced_models

    shapes = []
    for plan in read_plans(pte):
        delegates = [(d.backend_id, d.compile_specs, json.loads(d.payload[4:])["functionName"]) for d in plan.delegates]
        shapes.append((plan.name, plan.inputs, plan.outputs, plan.operators, delegates))
    models = [canonical_payload_digest(model) for model in referenced_models(pte)]
    program = Runtime.get().load_program(pte)
    constants = {plan.name: program.load_method(plan.name).execute([]) for plan in read_plans(pte) if not plan.delegates}
    return shapes, models, constants


def test_prefill_and_decode_methods_are_stock_export_static_llm_coremls(folders: dict[str, Path], tmp_path: Path) -> None:
    """``--prefill N``: ExecuTorch's prefill + decode Core ML export, run by lowerkit with its backend.

    Both sides get the checkpoint lowerkit converted (ExecuTorch converts Llama-architecture
    folders only through torchtune, which does not import here); the same methods, compile specs,
    canonical multifunction Core ML models (read from the .pte's named data, checked against
    ExecuTorch's own reader) and metadata values.
    """
    from lowerkit.cli._upstream import deserialize_pte
    from lowerkit.cli.pte_file import read_named_data

    prepared = hf_llm.prepare(folders["llama"], keep=False)
    stock = _static_export(prepared.checkpoint, prepared.params, tmp_path / "stock.pte")
    output = tmp_path / "lowerkit.pte"
    main(
        args=["lower", f"hf:{folders['llama']}", "--task", "text-generation", "-t", "coreml", "-o", str(output),
              "--max-seq-len", str(PREFILL_CONTEXT), "--prefill", str(PREFILL), "-q", "--no-cache"],
        standalone_mode=False,
    )  # fmt: skip
    fast = output.read_bytes()
    upstream = deserialize_pte(fast).named_data
    assert {key: bytes(upstream.buffers[entry.buffer_index]) for key, entry in upstream.pte_data.items()} == read_named_data(fast)
    (stock_shapes, stock_models, stock_constants), (shapes, models, constants) = _methods(stock), _methods(fast)
    assert [s[0] for s in shapes][:2] == ["forward", "prefill"] and len(models) >= 2
    assert shapes == stock_shapes
    assert models == stock_models
    assert constants.keys() == stock_constants.keys() and all(
        all(torch.equal(a, b) if isinstance(a, torch.Tensor) else a == b for a, b in zip(constants[k], stock_constants[k], strict=True))
        for k in constants
    )
