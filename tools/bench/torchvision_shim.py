"""Make ``import torchvision`` (and ``timm``) work here; benchmark and test harness only.

torchvision 0.28.0's PyPI wheel links its compiled ops (``torchvision/_C.so``) against the CUDA
build of torch; with the CPU torch this machine installs, loading ``_C`` fails, which torchvision
tolerates (``extension._has_ops()`` is then False and every ``register_meta`` is skipped), but
``torchvision/_meta_registrations.py`` registers fake kernels for ``torchvision::nms`` and
``torchvision::qnms`` unconditionally, and ``torch.library.register_fake`` raises
``RuntimeError: operator torchvision::nms does not exist``.

`ensure_torchvision_importable` defines those two schemas (as torchvision's C++ declares them,
with no kernel) before torchvision is imported, so the fake registrations succeed. Nothing else
changes: the model definitions need none of torchvision's ops, and calling ``torchvision.ops.nms``
still fails with torchvision's own "Couldn't load custom C++ ops" error. It is a no-op when the
ops exist (a torchvision whose ``_C`` loads) or when torchvision was imported already.

lowerkit never applies it: only ``bench.corpus`` and the tests under ``tests/real_models`` call it.
"""

from __future__ import annotations

import sys

import torch

__all__ = ["ensure_torchvision_importable"]

#: The ops ``torchvision/_meta_registrations.py`` registers fake kernels for without checking.
UNCONDITIONAL_FAKES = {
    "nms": "nms(Tensor dets, Tensor scores, float iou_threshold) -> Tensor",
    "qnms": "qnms(Tensor dets, Tensor scores, float iou_threshold) -> Tensor",
}

#: Keeps the schema definitions alive (a ``torch.library.Library`` removes them when collected).
_LIBRARY: list[torch.library.Library] = []


def _op_exists(name: str) -> bool:
    """Whether ``torchvision::name`` has a schema (from ``_C`` or an earlier definition)."""
    return hasattr(torch.ops.torchvision, name)


def ensure_torchvision_importable() -> None:
    """Define the torchvision op schemas its fake registrations need, if absent; idempotent."""
    if "torchvision" in sys.modules or _LIBRARY:
        return
    missing = [name for name in UNCONDITIONAL_FAKES if not _op_exists(name)]
    if not missing:
        return
    library = torch.library.Library("torchvision", "FRAGMENT")
    for name in missing:
        library.define(UNCONDITIONAL_FAKES[name])
    _LIBRARY.append(library)
