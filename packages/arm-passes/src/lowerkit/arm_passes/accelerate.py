"""accelerated_arm_pipeline: make ExecuTorch's own Arm lowering run lowerkit's fast pipeline."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator

from lowerkit.arm_passes import _upstream
from lowerkit.arm_passes.runner import FastArmPassManager, collect_reports
from lowerkit.pass_infra import PipelineReport

__all__ = ["accelerated_arm_pipeline"]


@contextlib.contextmanager
def accelerated_arm_pipeline(*, verify: bool = False) -> Iterator[list[PipelineReport]]:
    """Within the block, the Arm TOSA/Ethos-U backends run the fast pipeline; yields the list of reports.

    Only the backend pass pipeline changes (same passes, same order, same output); ExecuTorch
    is restored on exit, exceptions included. With `verify`, every pass is also re-run the
    stock way and a difference raises ``lowerkit.pass_infra.PassEquivalenceError``.
    """
    reports: list[PipelineReport] = []
    manager: type = FastArmPassManager
    if verify:
        manager = type("VerifyingFastArmPassManager", (FastArmPassManager,), {"verify": True})
    with _upstream.patched_arm_pass_manager(manager), collect_reports(reports):
        yield reports
