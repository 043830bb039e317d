"""Find Arm's ML SDK model converter for the VGF targets and hand it to ExecuTorch for one lowering.

ExecuTorch's VGF backend runs the ``model-converter`` binary (TOSA -> VGF). It looks for it in
``MODEL_CONVERTER_PATH``, then for ``model-converter`` on ``PATH``
(``executorch/backends/arm/vgf/model_converter.py``: ``find_model_converter_binary``). In a Pants
test sandbox or the lowerkit PEX the package's console script is not on ``PATH``, so lowerkit
takes the binary the ``ai-ml-sdk-model-converter`` package ships
(``model_converter/binaries/bin/model-converter``) and sets ``MODEL_CONVERTER_PATH`` for the
duration of the lowering only (``converter_environment``). A ``MODEL_CONVERTER_PATH`` the user
set wins, and is checked.

`find_model_converter` is the one lookup: the lowering uses it here, and the lowering cache's key
(``lowerkit.cli.cache.key``) names the converter by it. This module imports no torch.
"""

from __future__ import annotations

import contextlib
import importlib.util
import os
import shutil
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Literal

from lowerkit.arm_passes.errors import ArmLoweringError

__all__ = [
    "ENV",
    "ConverterSource",
    "converter_environment",
    "find_model_converter",
    "locate_model_converter",
    "packaged_model_converter",
]

#: The variable ExecuTorch's VGF backend reads first.
ENV = "MODEL_CONVERTER_PATH"
_BINARY = "model-converter.exe" if sys.platform.startswith("win") else "model-converter"
#: Where the converter comes from: MODEL_CONVERTER_PATH, the installed package, PATH, or nowhere.
ConverterSource = Literal["user", "packaged", "PATH", "none"]
_INSTALL = "pip install ai-ml-sdk-model-converter (or set MODEL_CONVERTER_PATH to a model-converter binary)"


def packaged_model_converter() -> Path | None:
    """The binary inside the installed ``model_converter`` package (ai-ml-sdk-model-converter), or None."""
    spec = importlib.util.find_spec("model_converter")
    if spec is None or spec.origin is None:
        return None
    return Path(spec.origin).parent / "binaries" / "bin" / _BINARY


def _executable(path: Path) -> bool:
    return path.is_file() and os.access(path, os.X_OK)


def find_model_converter() -> tuple[ConverterSource, Path | None]:
    """Where the converter a VGF lowering runs comes from, and its path, checking nothing more.

    ``MODEL_CONVERTER_PATH`` as the user set it; else the installed package's binary when it is
    executable; else ``model-converter`` on ``PATH``; else ("none", the package's binary or None).
    """
    user = os.environ.get(ENV)
    if user:
        return "user", Path(user)
    packaged = packaged_model_converter()
    if packaged is not None and _executable(packaged):
        return "packaged", packaged
    found = shutil.which(_BINARY)
    if found is not None:
        return "PATH", Path(found)
    return "none", packaged


def locate_model_converter() -> tuple[Path | None, bool]:
    """(the converter to hand to ExecuTorch, or None when it finds one itself; whether the user set it).

    Raises ArmLoweringError (one line, naming the fix) when there is none.
    """
    source, path = find_model_converter()
    if source == "user" and path is not None:
        if not _executable(path):
            raise ArmLoweringError(
                f"{ENV}={path} is not an executable file; point it at the model-converter binary, "
                "or unset it to use the one ai-ml-sdk-model-converter installs"
            )
        return path, True
    if source == "packaged":
        return path, False
    if source == "PATH":
        return None, False
    where = f" ({path} is missing or not executable)" if path is not None else ""
    raise ArmLoweringError(f"the VGF targets need Arm's ML SDK model converter{where}: {_INSTALL}")


@contextlib.contextmanager
def converter_environment() -> Iterator[Path | None]:
    """Within the block ExecuTorch's VGF backend finds the converter; the environment is restored on exit.

    Yields the binary set in ``MODEL_CONVERTER_PATH`` (None when ``model-converter`` on ``PATH``
    is used). Callers hold ``lowering_lock()``: the environment is process-wide.
    """
    binary, from_user = locate_model_converter()
    if binary is None or from_user:
        yield binary
        return
    previous = os.environ.get(ENV)
    os.environ[ENV] = str(binary)
    try:
        yield binary
    finally:
        if previous is None:
            os.environ.pop(ENV, None)
        else:
            os.environ[ENV] = previous
