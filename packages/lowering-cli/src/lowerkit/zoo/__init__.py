"""lowerkit's model zoo: small models with random weights, defined in code.

Every model comes with example inputs and a calibration sampler, so that the demo,
the benchmarks and the cross-package tests can lower it without downloads.

The registry (and torch with it) is imported on first use of these names, so that
`lowerkit.zoo.catalogue` (names and descriptions) can be read without torch.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from lowerkit.zoo.registry import ZooModel, get, models, names

__all__ = ["ZooModel", "get", "models", "names"]


def __getattr__(name: str) -> Any:
    if name in __all__:
        from lowerkit.zoo import registry

        return getattr(registry, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
