"""What an Arm lowering adds to the cache key: the model converter a VGF lowering runs."""

from __future__ import annotations


def converter_fingerprint() -> str:
    """The model converter a VGF lowering runs, found by ``arm_passes.converter.find_model_converter``.

    A binary named by ``MODEL_CONVERTER_PATH``, or found on ``PATH`` when no package ships one,
    is the user's own: keyed by its bytes. The one ``ai-ml-sdk-model-converter`` installs is
    keyed by that distribution's version (in `cache.key.toolchain_fingerprint`).
    """
    from lowerkit.arm_passes import (
        converter,  # only VGF keys need it (a Core ML key loads no Arm module)
    )
    from lowerkit.cli.cache.digests import file_digest

    source, path = converter.find_model_converter()
    if path is None or source in ("packaged", "none"):
        return source
    return f"{converter.ENV if source == 'user' else 'PATH'}:{file_digest(path)}"
