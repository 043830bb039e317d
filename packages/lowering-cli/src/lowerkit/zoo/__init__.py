"""lowerkit's model zoo: small models with random weights, defined in code.

Every model comes with example inputs and a calibration sampler, so that the demo,
the benchmarks and the cross-package tests can lower it without downloads.

The registry (and torch with it) is imported on first use of these names
(``lowerkit.pass_infra.helpers.lazy_exports``), so that `lowerkit.zoo.catalogue` (names and
descriptions) can be read without torch.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from lowerkit.pass_infra.helpers.lazy_exports import lazy_exports

if TYPE_CHECKING:
    from lowerkit.zoo.registry import (
        ZooModel,  # one zoo model: its factory, example inputs and calibration sampler
        get,  # the zoo model by name
        models,  # every zoo model
        names,  # every zoo model's name
    )

__all__, __getattr__, __dir__ = lazy_exports(__name__)
