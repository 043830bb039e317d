"""The wrapper modules sources put around a model so that it exports with flat tensor inputs and outputs."""

from __future__ import annotations

from typing import Any

import torch


def rebuild(template: Any, flat: list[Any]) -> Any:
    """`template`'s nesting of tuples / lists filled with `flat`'s items, in order (consumes `flat`)."""
    if isinstance(template, tuple | list):
        return type(template)(rebuild(item, flat) for item in template)
    return flat.pop(0)


def flatten(inputs: tuple[Any, ...]) -> tuple[list[Any], bool]:
    """The leaves of nested tuples / lists, in order, and whether there was any nesting."""
    flat: list[Any] = []
    nested = False
    for item in inputs:
        if isinstance(item, tuple | list):
            inner, _ = flatten(tuple(item))
            flat.extend(inner)
            nested = True
        else:
            flat.append(item)
    return flat, nested


class Unflatten(torch.nn.Module):
    """Takes flat tensors and calls `inner` with the nesting of `template` (e.g. LSTM's (x, (h, c)))."""

    def __init__(self, inner: torch.nn.Module, template: tuple[Any, ...]) -> None:
        super().__init__()
        self.inner = inner
        self.template = template

    def forward(self, *flat: torch.Tensor) -> Any:
        return self.inner(*rebuild(self.template, list(flat)))


class Logits(torch.nn.Module):
    """A Hugging Face model called with one tensor input (keyword `input_name`), returning one
    tensor (`output`, e.g. logits) with no cache: what torch.export and the backends take."""

    def __init__(self, model: torch.nn.Module, *, output: str = "logits", input_name: str = "input_ids") -> None:
        super().__init__()
        self.model = model
        self.output = output
        self.input_name = input_name

    def forward(self, inputs: torch.Tensor) -> torch.Tensor:
        kwargs: dict[str, Any] = {self.input_name: inputs, "return_dict": True}
        if getattr(self.model.config, "use_cache", None) is not None:
            kwargs["use_cache"] = False
        result = self.model(**kwargs)
        value: torch.Tensor = getattr(result, self.output)
        return value
