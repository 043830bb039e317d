"""The command-line options that build a model source (`lower`, `debug`): --weights, --task, ..."""

from __future__ import annotations

import functools
from collections.abc import Callable
from pathlib import Path
from typing import Any

import click

from lowerkit.cli.sources.options import LLM_TASK, TASKS, SourceOptions


def source_options(command: Callable[..., Any]) -> Callable[..., Any]:
    """Add the source options to a command; its function gets them as one `SourceOptions`, `source_options`."""

    @functools.wraps(command)
    def with_source_options(
        *args: Any,
        weights: Path | None,
        task: str | None,
        random_weights: bool,
        sequence_length: int | None,
        image_size: int | None,
        **kwargs: Any,
    ) -> Any:
        built = SourceOptions(weights, task, random_weights, sequence_length, image_size)
        return command(*args, source_options=built, **kwargs)

    decorated: Callable[..., Any] = with_source_options
    for option in reversed(
        (
            click.option("--weights", type=click.Path(path_type=Path), help="Weights for the model's architecture: .safetensors or a state_dict (torch.load weights_only)."),
            click.option("--task", type=click.Choice((*TASKS, LLM_TASK)), help=f"hf:DIR: the head to build when config.json does not say; {LLM_TASK}: a KV-cache program ExecuTorch's LLM runner generates with."),
            click.option("--random-weights", is_flag=True, help="et:NAME: build untrained (random, seeded) weights instead of downloading them."),
            click.option("--sequence-length", type=click.IntRange(min=1), help="hf:DIR text models: tokens in the example input."),
            click.option("--image-size", type=click.IntRange(min=1), help="hf:DIR / tv:NAME image models: the example image's size."),
        )
    ):
        decorated = option(decorated)
    return decorated


def as_arguments(options: SourceOptions) -> list[str]:
    """The command-line arguments that give `options` (to print commands that reproduce a run)."""
    arguments: list[str] = []
    if options.weights is not None:
        arguments += ["--weights", str(options.weights)]
    if options.task is not None:
        arguments += ["--task", options.task]
    if options.random_weights:
        arguments.append("--random-weights")
    if options.sequence_length is not None:
        arguments += ["--sequence-length", str(options.sequence_length)]
    if options.image_size is not None:
        arguments += ["--image-size", str(options.image_size)]
    return arguments
