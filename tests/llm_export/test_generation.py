"""A program ``lowerkit llm`` writes generates text: ExecuTorch's runtime, on Linux, greedy-decodes the
same 16 tokens as the eager model.

``bench.llm_flows``'s CI decoder (Llama-3-shaped, seeded checkpoint), exported by ``lowerkit llm``
with the KV cache and static shapes and no backend (the portable path: ExecuTorch's Core ML and
Arm delegates do not run on Linux). The program is run as ExecuTorch's LLM runner runs it: the
prompt one token at a time at its position, then each argmax fed back. The reference is
ExecuTorch's own eager ``Transformer`` with the same weights and no cache, recomputing the whole
sequence each step. The metadata methods the runner reads are checked too.
"""

from __future__ import annotations

import json
from pathlib import Path

import torch

from bench.llm_flows import model_files, overrides
from llm_export.runtime_greedy import greedy_with_the_runtime
from lowerkit.cli.app import main
from lowerkit.cli.llm import dotlist

MODEL = "llama_ci"
PROMPT = [1, 7, 42, 99]
NEW_TOKENS = 16


def _portable_program(output: Path) -> None:
    values = {k: v for k, v in overrides(MODEL, "coreml-fp16", output).items() if not k.startswith("backend.")}
    main(args=["llm", *dotlist(values), "-q", "--no-cache"], standalone_mode=False)


def _greedy_eager() -> list[int]:
    from executorch.examples.models.llama.llama_transformer import construct_transformer
    from executorch.examples.models.llama.model_args import ModelArgs

    params, checkpoint = model_files(MODEL)
    args = ModelArgs(**json.loads(params.read_text()), max_seq_len=64, max_context_len=64, generate_full_logits=True)
    model = construct_transformer(args)
    model.load_state_dict(torch.load(checkpoint), strict=False)
    tokens = list(PROMPT)
    with torch.no_grad():
        for _ in range(NEW_TOKENS):
            tokens.append(int(model.eval()(torch.tensor([tokens]))[0, -1].argmax()))
    return tokens[len(PROMPT) :]


def test_the_llm_program_generates_what_the_eager_model_generates(tmp_path: Path) -> None:
    output = tmp_path / "model.pte"
    _portable_program(output)
    generated, metadata = greedy_with_the_runtime(output.read_bytes(), PROMPT, NEW_TOKENS)
    assert generated == _greedy_eager()
    assert len(set(generated)) > 1  # not a degenerate repetition
    params = json.loads(model_files(MODEL)[0].read_text())
    assert metadata["use_kv_cache"] is True and metadata["enable_dynamic_shape"] is False
    assert metadata["get_max_seq_len"] == 64 and metadata["get_vocab_size"] == params["vocab_size"]
    assert metadata["get_n_layers"] == params["n_layers"]
