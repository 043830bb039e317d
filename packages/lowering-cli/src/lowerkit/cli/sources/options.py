"""What a user may say about how a model source builds its model (the CLI's source options)."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

#: The tasks `hf:DIR` builds a head for (`--task`).
TASKS = ("causal-lm", "masked-lm", "encoder", "image-classification")
#: The `--task` that builds a generating program through ExecuTorch's LLM export (`sources.hf_llm`).
LLM_TASK = "text-generation"


@dataclass(frozen=True)
class SourceOptions:
    """How to build a model from its source; the defaults build what the source alone says.

    Every field decides the built model, so every field is in the cache key
    (`lowerkit.cli.cache.key.source_key`).
    """

    #: A weights file (safetensors, or a state_dict torch.load(weights_only=True) reads).
    weights: Path | None = None
    #: `hf:` only: the head to build when the config's `architectures` does not say (see TASKS).
    task: str | None = None
    #: Build untrained (random, seeded) weights where the source's weights would come from a hub.
    random_weights: bool = False
    #: `hf:` text models: tokens in the example input (default: the config's positions, at most 128).
    sequence_length: int | None = None
    #: `hf:` / `tv:` image models: the example image's height and width (default: the config's / 224).
    image_size: int | None = None

    def given(self) -> list[str]:
        """The options that were set, as the CLI spells them (for errors naming what does not apply)."""
        names = {
            "weights": "--weights", "task": "--task", "random_weights": "--random-weights",
            "sequence_length": "--sequence-length", "image_size": "--image-size",
        }
        return [flag for field, flag in names.items() if getattr(self, field) not in (None, False)]


DEFAULT = SourceOptions()
