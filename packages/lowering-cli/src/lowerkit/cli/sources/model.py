"""What every MODEL source builds: a `ModelSource`, a model to lower with its example inputs."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import torch

Inputs = tuple[torch.Tensor, ...]


@dataclass(frozen=True)
class ModelSource:
    """A model to lower: an eager module or an exported program, with example inputs."""

    name: str
    example_inputs: Inputs
    module: torch.nn.Module | None = None
    exported: torch.export.ExportedProgram | None = None
    #: Deterministic calibration batches, when the source knows how to make them.
    sampler: Callable[[int], list[Inputs]] | None = None
    #: What the user should know about how it was built (e.g. random weights), shown as warnings.
    notes: tuple[str, ...] = ()

    def export(self) -> torch.export.ExportedProgram:
        """The model as an ExportedProgram (exported now when given as a module)."""
        if self.exported is not None:
            return self.exported
        assert self.module is not None
        return torch.export.export(self.module, self.example_inputs)

    def eager(self) -> torch.nn.Module:
        """A callable module: the eager one, or the exported program's module."""
        if self.module is not None:
            return self.module
        assert self.exported is not None
        return self.exported.module()
