"""What every lowering entry point checks first: the model and its example inputs."""

from __future__ import annotations

from typing import Any

__all__ = ["example_input_tuple", "require_model"]


def example_input_tuple(example_inputs: Any, error: type[Exception]) -> tuple[Any, ...]:
    """`example_inputs` as a tuple (a list or one tensor are accepted); `error` otherwise."""
    import torch

    if isinstance(example_inputs, tuple):
        return example_inputs
    if isinstance(example_inputs, list):
        return tuple(example_inputs)
    if isinstance(example_inputs, torch.Tensor):
        return (example_inputs,)
    raise error(
        f"example_inputs must be a tuple of tensors, got {type(example_inputs).__name__}; "
        "pass e.g. (torch.randn(1, 3, 32, 32),)"
    )


def require_model(model: Any, entry_point: str, error: type[Exception]) -> None:
    """Raise `error` unless `model` is a torch.nn.Module or an ExportedProgram."""
    import torch
    from torch.export import ExportedProgram

    if not isinstance(model, torch.nn.Module | ExportedProgram):
        raise error(
            f"{entry_point} needs a torch.nn.Module or a torch.export ExportedProgram, "
            f"got {type(model).__name__}"
        )
