"""The exception raised for mistakes a user of the Core ML quantizer can make."""

from __future__ import annotations


class CoreMLQuantizerError(ValueError):
    """A configuration or model the Core ML quantizer cannot handle; the message says what to do."""
