"""TOSA_PREPROCESS: ``TOSABackend._preprocess`` routed through the wrappers the calling thread's
scopes name (``wrapper(edge_program, compile_spec, inner)``), to record what the backend
serializes (`_upstream.capture_tosa_flatbuffers` & co.). Changes no result; like every patch it
is refused on unproven ExecuTorch versions (`wrapped_preprocess`)."""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator
from typing import Any

from executorch.backends.arm.tosa.backend import TOSABackend
from torch.export import ExportedProgram

from lowerkit.arm_passes.versions import accelerated_ok
from lowerkit.pass_infra.accelerations.patching import Patch, Replacement

__all__ = ["TOSA_PREPROCESS", "wrapped_preprocess"]

_stock_preprocess: Callable[[ExportedProgram, Any], Any] = TOSABackend.__dict__["_preprocess"].__func__


def _preprocess_through_wrappers(edge_program: ExportedProgram, compile_spec: Any) -> Any:
    """``TOSABackend._preprocess`` through the calling thread's wrappers, innermost first."""
    wrappers = TOSA_PREPROCESS.stack()

    def call(index: int, program: ExportedProgram, spec: Any) -> Any:
        if index < 0:
            return _stock_preprocess(program, spec)
        return wrappers[index](program, spec, lambda p, s: call(index - 1, p, s))

    return call(len(wrappers) - 1, edge_program, compile_spec)


#: TOSABackend._preprocess routed through ``wrapper(edge_program, compile_spec, inner)``s.
TOSA_PREPROCESS = Patch(
    "lowerkit.arm_passes._upstream_tosa_preprocess",
    lambda: [Replacement(TOSABackend, "_preprocess", staticmethod(_preprocess_through_wrappers))],
)


@contextlib.contextmanager
def wrapped_preprocess(wrapper: Callable[[ExportedProgram, Any, Any], Any]) -> Iterator[None]:
    """Within the block (this thread), ``TOSABackend._preprocess`` runs through `wrapper`; on
    ExecuTorch versions other than ``PROVEN_ON`` it is left alone (nothing recorded), with an
    ``UnprovenVersionWarning``."""
    if not accelerated_ok("recording TOSABackend._preprocess"):
        yield
        return
    with TOSA_PREPROCESS.scope(wrapper):
        yield
