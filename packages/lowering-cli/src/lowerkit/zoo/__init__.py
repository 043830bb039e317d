"""lowerkit's model zoo: small models with random weights, defined in code.

Every model comes with example inputs and a calibration sampler, so that the demo,
the benchmarks and the cross-package tests can lower it without downloads.
"""

from lowerkit.zoo.registry import ZooModel, get, models, names

__all__ = ["ZooModel", "get", "models", "names"]
