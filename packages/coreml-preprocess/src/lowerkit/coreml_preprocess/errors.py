"""The errors a user of lowerkit's Core ML backend can cause, each saying what to do."""

from __future__ import annotations


class CoreMLOptionsError(ValueError):
    """Invalid Core ML compile options or compile specs; the message lists the valid choices."""


class PassPipelineError(CoreMLOptionsError):
    """A MIL pass pipeline names a pass coremltools does not have; the message suggests the closest."""


class CoreMLBackendConflictError(ImportError):
    """lowerkit's and ExecuTorch's Core ML backends were both loaded into one process."""


class CoreMLLoweringError(ValueError):
    """The edge program cannot be lowered with these options (the message says how to fix it)."""
