"""VGF targets: lowerkit's lowering gives stock ExecuTorch's .pte and VGF payload, with VgfBackend's own passes.

Both lowerings run here, now, in this process (as tests/arm/test_sameness.py: stock is
ExecuTorch's public API), on the cheapest zoo CNN; the model converter is the one
ai-ml-sdk-model-converter installs, which lowerkit finds without it being on PATH (the stock
side is handed the same path, as a user's environment would).
"""

from __future__ import annotations

import os

import pytest

from arm.conftest import CI_MODEL, lowered, stock_lowered
from golden.arm import as_lowered
from lowerkit.arm_passes import VGF_TARGETS, ArmLoweringError, arm_pipeline_passes, npu_reports
from lowerkit.arm_passes.converter import ENV


@pytest.mark.parametrize("target", VGF_TARGETS)
def test_vgf_equals_live_stock(target: str) -> None:
    had = os.environ.get(ENV)
    stock = stock_lowered(CI_MODEL, target)
    fast = lowered(CI_MODEL, target)
    assert os.environ.get(ENV) == had, "the converter's path leaked out of the lowering"
    assert stock.payloads and stock.pte
    assert fast.vgf_binaries and fast.tosa_flatbuffers and not fast.vela_binaries
    assert as_lowered(fast).payloads == stock.payloads  # the VGF payloads
    assert fast.pte == stock.pte
    assert all(vgf in fast.pte for vgf in fast.vgf_binaries)
    # The accelerated pipeline ran, and it is upstream's VGF pipeline (VgfBackend's passes included).
    assert fast.report is not None
    # (the report names the incremental drop-ins lowerkit runs for the permute propagation passes)
    names = [row.name.removeprefix("Incremental") for row in fast.report.rows]
    assert names == [type(p).__name__ for p in arm_pipeline_passes(target)]
    assert "RewriteGridSamplerToTosaCustomPass" in names
    assert 0 < sum(r.ran for r in fast.report.rows) < len(names)


def test_the_npu_report_refuses_vgf() -> None:
    with pytest.raises(ArmLoweringError, match="needs an Ethos-U target; vgf-fp has no Vela output"):
        npu_reports(lowered(CI_MODEL, "vgf-fp"))
