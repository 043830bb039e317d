"""Shared, cached lowerings of the Arm zoo CNNs for the cross-package tests (each costs seconds).

The test files of tests/arm run in one process (see tests/BUILD), so each lowering is done once
for all of them.
"""

from __future__ import annotations

import os
from functools import cache
from pathlib import Path
from typing import Any

import pytest

from bench.realworld_flows import Lowered
from golden.arm import lowering_case, stock_case

#: The smallest Arm zoo CNN: lowered for every target in CI; the others for TOSA INT.
CI_MODEL = "ds_cnn"


@cache
def lowered(model: str, target: str) -> Any:
    """lowerkit's lower_to_arm of a zoo model (cached per process): an ArmLowering."""
    return lowering_case(model, target)


@cache
def stock_lowered(model: str, target: str) -> Lowered:
    """Stock ExecuTorch's lowering of a zoo model, public API only (cached per process)."""
    return stock_case(model, target)


#: Set by tests/BUILD's scalar_cpu variant (with ATEN_CPU_CAPABILITY=default): run only the tests
#: marked ``cpu_rerun``.
CPU_RERUN = "LOWERKIT_CPU_RERUN"

#: The mark for what the scalar-kernel rerun covers: the tests whose verdict can depend on the CPU's
#: float kernels. Calibration runs float kernels, so every scale and byte after it differs per CPU
#: capability; lowerkit equals stock there only if what lowerkit computes itself from those floats
#: (its HistogramObserver search, ``accelerated_quantization``) stays exact on other data. One
#: stock-vs-lowerkit TOSA INT lowering per kind of network (ds_cnn: depthwise; resnet8: residual
#: adds) proves that on the scalar kernels; the tolerances of test_numerics (float fake-quant
#: against integer TOSA, measured on AVX-512 and scalar kernels alike) are checked on every model.
#: The rest of the directory is not rerun: its verdicts are structural (layout transposes, Vela
#: and VGF payloads of the same TOSA, determinism) or cover the same histogram search on other
#: graphs (cnn9_layernorm, mobilenet, the transformer, VGF), which the native run proves.
cpu_rerun = pytest.mark.cpu_rerun


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line("markers", "cpu_rerun: also run by the scalar-kernel variant (tests/arm/conftest.py)")


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Under ``LOWERKIT_CPU_RERUN=1``, deselect this directory's tests not marked ``cpu_rerun``."""
    if os.environ.get(CPU_RERUN) != "1":
        return
    here = Path(__file__).parent

    def skipped(item: pytest.Item) -> bool:
        return item.path.is_relative_to(here) and item.get_closest_marker("cpu_rerun") is None

    deselected = [item for item in items if skipped(item)]
    if deselected:
        config.hook.pytest_deselected(items=deselected)
        items[:] = [item for item in items if not skipped(item)]
