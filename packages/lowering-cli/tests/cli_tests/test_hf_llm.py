"""`hf:DIR --task text-generation`'s parts that need no export: params.json from config.json, the
converters' guard, and which targets ExecuTorch's LLM export builds.

The export itself (generation against transformers, sameness with stock export_llm per target) is
tests/llm_hf/test_hf_text_generation.py.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from lowerkit.cli import targets, text_generation
from lowerkit.cli.errors import UsageError
from lowerkit.cli.sources import converters, hf_llm

FOLDER = Path("model")
#: config.json of Qwen/Qwen3-0.6B (the fields params_of reads).
QWEN3_0_6B: dict[str, Any] = {
    "model_type": "qwen3", "hidden_size": 1024, "intermediate_size": 3072, "num_hidden_layers": 28,
    "num_attention_heads": 16, "num_key_value_heads": 8, "head_dim": 128, "vocab_size": 151936,
    "rms_norm_eps": 1e-06, "rope_theta": 1000000, "hidden_act": "silu", "tie_word_embeddings": True,
}  # fmt: skip
#: ExecuTorch's own examples/models/qwen3/config/0_6b_config.json (its fields that decide the model).
EXECUTORCH_QWEN3_0_6B: dict[str, Any] = {
    "dim": 1024, "hidden_dim": 3072, "n_heads": 16, "head_dim": 128, "n_kv_heads": 8, "n_layers": 28,
    "norm_eps": 1e-06, "rope_theta": 1000000.0, "use_scaled_rope": False, "vocab_size": 151936,
    "use_hf_rope": True, "attention_qkv_bias": False, "use_qk_norm": True, "qk_norm_before_rope": True,
}  # fmt: skip


def test_params_are_executorchs_own_config_for_qwen3_0_6b() -> None:
    params = hf_llm.params_of(QWEN3_0_6B, FOLDER)
    assert {k: params[k] for k in EXECUTORCH_QWEN3_0_6B} == EXECUTORCH_QWEN3_0_6B


def test_llama3_rope_scaling_is_executorchs_and_other_kinds_are_refused() -> None:
    llama: dict[str, Any] = {**QWEN3_0_6B, "model_type": "llama", "rope_scaling": {
        "rope_type": "llama3", "factor": 32.0, "high_freq_factor": 4.0, "low_freq_factor": 1.0,
        "original_max_position_embeddings": 8192}}  # fmt: skip
    params = hf_llm.params_of(llama, FOLDER)
    assert (params["use_scaled_rope"], params["rope_scale_factor"], params["high_freq_factor"]) == (True, 32.0, 4.0)
    assert "use_qk_norm" not in params
    other_context = {**llama, "rope_scaling": {**llama["rope_scaling"], "original_max_position_embeddings": 4096}}
    with pytest.raises(UsageError, match="ExecuTorch's Llama 3 rotary scaling fixes"):
        hf_llm.params_of(other_context, FOLDER)
    with pytest.raises(UsageError, match="has no 'yarn' rotary scaling"):
        hf_llm.params_of({**llama, "rope_scaling": {"rope_type": "yarn", "factor": 4.0}}, FOLDER)


def test_transformers_5_rope_parameters_and_longrope() -> None:
    phi = {**QWEN3_0_6B, "model_type": "phi3", "partial_rotary_factor": 0.75, "max_position_embeddings": 131072,
           "original_max_position_embeddings": 4096, "rope_theta": None,
           "rope_parameters": {"rope_type": "longrope", "rope_theta": 10000.0, "short_factor": [1.0], "long_factor": [2.0]}}  # fmt: skip
    params = hf_llm.params_of(phi, FOLDER)
    assert params["rope_theta"] == 10000.0 and params["partial_rotary_factor"] == 0.75
    assert (params["rope_scaling_short_factor"], params["rope_scaling_long_factor"]) == ([1.0], [2.0])
    assert params["original_max_position_embeddings"] == 4096


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ({"model_type": "gpt2"}, "builds no 'gpt2' decoder; it builds: llama (Llama 3.x, SmolLM2), qwen2 (Qwen 2.5), qwen3"),
        ({"hidden_act": "gelu"}, "ExecuTorch's decoder uses SiLU"),
        ({"model_type": "llama", "attention_bias": True}, "no attention biases"),
        ({"use_sliding_window": True}, "no sliding window"),
    ],
)  # fmt: skip
def test_what_executorchs_decoder_cannot_build_is_one_line(change: dict[str, object], message: str) -> None:
    with pytest.raises(UsageError, match=message.replace("(", r"\(").replace(")", r"\)")):
        hf_llm.params_of({**QWEN3_0_6B, **change}, FOLDER)


def test_the_runners_bos_and_eos_ids_come_from_config_json(tmp_path: Path) -> None:
    prepared = hf_llm.Prepared(tmp_path / "c.pth", tmp_path / "p.json", hf_llm.FAMILIES["qwen3"],
                               {**QWEN3_0_6B, "bos_token_id": 151643, "eos_token_id": [151645, 151643]})  # fmt: skip
    values = hf_llm.llm_values(prepared, {"backend.coreml.enabled": True}, max_seq_len=128, output=tmp_path / "m.pte")
    assert json.loads(values["base.metadata"]) == {"get_bos_id": 151643, "get_eos_ids": [151645, 151643]}
    assert values["model.use_kv_cache"] is True and values["export.max_seq_length"] == 128
    with pytest.raises(UsageError, match="--max-seq-len 200 is more than the model's 128 positions"):
        hf_llm.llm_values(
            hf_llm.Prepared(prepared.checkpoint, prepared.params, prepared.family, {**prepared.config, "max_position_embeddings": 128}),
            {}, max_seq_len=200, output=tmp_path / "m.pte",
        )  # fmt: skip


def test_the_converters_needing_torchtune_are_the_sources_lowerkit_was_proven_on() -> None:
    """A new ExecuTorch that changes them fails here (and the stand-ins are refused at run time)."""
    for module, proven in converters.PROVEN_SOURCES.items():
        assert converters.source_hash(module) == proven, module


def test_targets_of_the_llm_export_are_each_backends_declaration() -> None:
    supported = text_generation.supported_targets()
    assert {"coreml", "coreml-int8", "coreml-w4", "tosa-int", "tosa-fp", "ethos-u55-128", "ethos-u85-256", "vgf-int", "vgf-fp"} <= set(supported)
    assert not {"coreml-fp32", "coreml-palettize4", "tosa-int16"} & set(supported)
    u55 = targets.get("ethos-u55-128")
    assert targets.backend_of(u55).llm_overrides(u55) == {
        "backend.ethosu.enabled": True, "backend.ethosu.target": "ethos-u55-128", "quantization.pt2e_quantize": "ethosu_8a8w"
    }  # fmt: skip


def test_the_runners_tokenizer_is_the_folders_tokenizer_json_else_its_tokenizer_model(tmp_path: Path) -> None:
    assert hf_llm.tokenizer_of(tmp_path) is None
    (tmp_path / "tokenizer.model").write_bytes(b"sentencepiece")
    assert hf_llm.tokenizer_of(tmp_path) == tmp_path / "tokenizer.model"
    (tmp_path / "tokenizer.json").write_text("{}")
    assert hf_llm.tokenizer_of(tmp_path) == tmp_path / "tokenizer.json"


def test_overrides_become_the_prefill_and_decode_exporters_flags() -> None:
    from lowerkit.cli.prefill_decode import flags_of

    assert flags_of(["dtype=fp32", "no_graph_breaks=true", "embedding_quantize=4,32"]) == [
        "--dtype", "fp32", "--no_graph_breaks", "--embedding_quantize", "4,32",
    ]  # fmt: skip
    with pytest.raises(UsageError, match="'--dtype' is not a KEY=VALUE flag"):
        flags_of(["--dtype"])


def test_the_prefill_and_decode_export_is_cached_by_flags_and_input_content(tmp_path: Path) -> None:
    """A second export with the same flags and input files is a hit (the same bytes, the exporter not
    run); another flag or another checkpoint content is a miss. The exporter here writes its argv."""
    from dataclasses import dataclass, field

    from lowerkit.cli import prefill_decode
    from lowerkit.cli.cache.cached import CacheSettings
    from lowerkit.cli.cache.store import LocalStore
    from lowerkit.cli.llm import LlmExport
    from lowerkit.cli.progress import Steps

    @dataclass
    class Exporter:
        family: str = "coreml"
        title: str = "Core ML"
        runs: list[list[str]] = field(default_factory=list)

        def export_llm_prefill_decode(self, argv: list[str]) -> None:
            self.runs.append(list(argv))
            Path(argv[argv.index("--output") + 1]).write_text(" ".join(argv[: argv.index("--checkpoint")]))

    checkpoint, params = tmp_path / "model.pth", tmp_path / "params.json"
    checkpoint.write_bytes(b"weights")
    params.write_text("{}")
    inputs = {"--checkpoint": checkpoint, "--params": params}
    cache, exporter = CacheSettings(local=LocalStore(tmp_path / "cache")), Exporter()

    def export(flags: list[str], output: str) -> LlmExport:
        return prefill_decode.export(exporter, flags, inputs, tmp_path / output, cache=cache, steps=Steps(show=False))  # type: ignore[arg-type]

    first = export(["--input_len", "8"], "a.pte")
    again = export(["--input_len", "8"], "b.pte")
    assert (first.cache, again.cache, len(exporter.runs)) == ("miss", "hit", 1)
    assert (tmp_path / "b.pte").read_bytes() == (tmp_path / "a.pte").read_bytes() == b"--input_len 8"
    assert export(["--input_len", "16"], "c.pte").cache == "miss"
    checkpoint.write_bytes(b"other weights")
    assert export(["--input_len", "8"], "d.pte").cache == "miss"
    assert not list(tmp_path.glob(".lowerkit-prefill-decode-*"))  # the staging folders are gone
