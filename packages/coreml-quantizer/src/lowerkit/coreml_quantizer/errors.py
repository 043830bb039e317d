"""The exception and warning for configs and models the Core ML quantizer cannot take as given."""

from __future__ import annotations


class CoreMLQuantizerError(ValueError):
    """A configuration or model the Core ML quantizer cannot handle; the message says what to do."""


class IgnoredConfigFieldWarning(UserWarning):
    """A config field that pt2e quantization ignores (as ExecuTorch's quantizer does, silently)."""
