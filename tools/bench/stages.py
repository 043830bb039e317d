"""Per-stage wall times of one Arm lowering, timed from outside (nothing lowered changes).

``StageClock.scope()`` wraps the upstream stage functions that ``lowerkit.arm_passes.lowering``
and stock's public-API flow (``bench.realworld_flows``, which imports them where it calls them)
call (``torch.export.export``, ``prepare_pt2e``, ``convert_pt2e``,
``to_edge_transform_and_lower``, ``EdgeProgramManager.to_executorch``, ExecuTorch's
emit + serialize, ``.buffer``, Vela) with timers, and puts them back on exit. Times are
exclusive: a stage nested in another (Vela in ``to_edge_transform_and_lower``, emit +
serialize in ``to_executorch``) is not counted in its parent, and "other" is what no stage
covers, so the rows add up to the total.
"""

from __future__ import annotations

import contextlib
import functools
import time
from collections.abc import Callable, Iterator
from typing import Any

STAGES = (
    "export",
    "prepare_pt2e",
    "calibrate",
    "convert_pt2e",
    "re-export",
    "to_edge_transform_and_lower",
    "vela",
    "to_executorch",
    "emit + serialize",
    "buffer",
    "other",
)


class StageClock:
    """Exclusive wall seconds per stage (see ``STAGES``) of the lowering run inside ``scope()``."""

    def __init__(self) -> None:
        self.seconds: dict[str, float] = dict.fromkeys(STAGES, 0.0)
        self.total = 0.0
        self._children: list[float] = []  # per open stage: time spent in nested stages
        self._exports = 0
        self._prepared_at: float | None = None

    def _timed(self, stage: str | Callable[[], str], fn: Callable[..., Any]) -> Callable[..., Any]:
        @functools.wraps(fn)
        def wrapper(*args: Any, **kwargs: Any) -> Any:
            name = stage if isinstance(stage, str) else stage()
            if name == "convert_pt2e" and self._prepared_at is not None:
                self.seconds["calibrate"] += time.perf_counter() - self._prepared_at
            self._children.append(0.0)
            start = time.perf_counter()
            try:
                return fn(*args, **kwargs)
            finally:
                elapsed = time.perf_counter() - start
                self.seconds[name] += elapsed - self._children.pop()
                if self._children:
                    self._children[-1] += elapsed
                if name == "prepare_pt2e":
                    self._prepared_at = time.perf_counter()

        return wrapper

    def _export(self, fn: Callable[..., Any]) -> Callable[..., Any]:
        """torch.export.export at top level only: the first is "export", later ones "re-export"."""
        timed = self._timed(lambda: "export" if self._exports == 1 else "re-export", fn)

        @functools.wraps(fn)
        def wrapper(*args: Any, **kwargs: Any) -> Any:
            if self._children:
                return fn(*args, **kwargs)
            self._exports += 1
            return timed(*args, **kwargs)

        return wrapper

    @contextlib.contextmanager
    def scope(self) -> Iterator[StageClock]:
        """Within the block, the stage functions are timed; ``total`` is the block's wall time."""
        import executorch.exir
        import torch
        from executorch.backends.arm._passes import decompose_permute_for_u55_pass
        from executorch.backends.arm.ethosu import backend as ethosu_backend
        from executorch.exir.program import _program
        from torchao.quantization.pt2e import quantize_pt2e

        from lowerkit.arm_passes import lowering
        from lowerkit.pass_infra import Patch, Replacement

        edge, et = _program.EdgeProgramManager, _program.ExecutorchProgramManager
        patches = [
            (torch.export, "export", self._export(torch.export.export)),
            (lowering, "prepare_pt2e", self._timed("prepare_pt2e", lowering.prepare_pt2e)),
            (lowering, "convert_pt2e", self._timed("convert_pt2e", lowering.convert_pt2e)),
            (lowering, "to_edge_transform_and_lower",
             self._timed("to_edge_transform_and_lower", lowering.to_edge_transform_and_lower)),
            (quantize_pt2e, "prepare_pt2e", self._timed("prepare_pt2e", quantize_pt2e.prepare_pt2e)),
            (quantize_pt2e, "convert_pt2e", self._timed("convert_pt2e", quantize_pt2e.convert_pt2e)),
            (executorch.exir, "to_edge_transform_and_lower",
             self._timed("to_edge_transform_and_lower", executorch.exir.to_edge_transform_and_lower)),
            (edge, "to_executorch", self._timed("to_executorch", edge.to_executorch)),
            (et, "__init__", self._timed("emit + serialize", et.__init__)),
            (et, "buffer", property(self._timed("buffer", et.buffer.fget))),
            (ethosu_backend, "vela_compile", self._timed("vela", ethosu_backend.vela_compile)),
            (decompose_permute_for_u55_pass, "vela_compile",
             self._timed("vela", decompose_permute_for_u55_pass.vela_compile)),
        ]
        # dispatch=False: timers are neutral for other threads, and `buffer` is a property.
        timers = Patch("bench-stage-timers", [Replacement(o, n, v, dispatch=False) for o, n, v in patches])
        with timers.scope():
            start = time.perf_counter()
            try:
                yield self
            finally:
                self.total = time.perf_counter() - start
                self.seconds["other"] = self.total - sum(self.seconds.values())
