"""ExecuTorch's runtime generating as its LLM runner does, on Linux (the portable program)."""

from __future__ import annotations

import torch


def greedy_with_the_runtime(pte: bytes, prompt: list[int], new_tokens: int) -> tuple[list[int], dict[str, object]]:
    """Greedy tokens after `prompt` (fed one token at a time at its position, then each argmax fed
    back), and the values of the program's metadata methods by name."""
    from executorch.runtime import Runtime

    program = Runtime.get().load_program(pte)
    forward = program.load_method("forward")
    logits = None
    for position, token in enumerate(prompt):
        logits = forward.execute([torch.tensor([[token]]), torch.tensor([position])])[0]
    generated: list[int] = []
    for position in range(len(prompt), len(prompt) + new_tokens):
        assert logits is not None
        generated.append(int(logits.reshape(-1, logits.shape[-1])[-1].argmax()))
        logits = forward.execute([torch.tensor([[generated[-1]]]), torch.tensor([position])])[0]
    metadata = {name: program.load_method(name).execute([])[0] for name in program.method_names if name != "forward"}
    return generated, metadata
