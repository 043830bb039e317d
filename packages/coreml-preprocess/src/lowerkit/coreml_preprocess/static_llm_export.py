"""ExecuTorch's LLM export with prefill and decode methods to Core ML, through lowerkit's backend.

ExecuTorch builds an LLM program with a ``prefill`` method (N tokens at once) beside its decode
``forward`` (one token), the two sharing their weights in one multifunction Core ML model, with
one exporter only: ``executorch/examples/apple/coreml/llama/export_static_llm_coreml.py
--multifunction`` (static attention, its KV caches as inputs and outputs; its runner is
``run_static_llm_multifunction.py``). `export_static_llm` runs that script's own ``main`` with
the script's own arguments, its ``CoreMLBackend`` / ``CoreMLPartitioner`` being lowerkit's (the
same compile specs; lowerkit's faster, deterministic preprocess) and ExecuTorch's generic stages
inside pass-infra's accelerated scopes.
"""

from __future__ import annotations

import contextlib
import sys
from collections.abc import Iterator, Sequence
from types import ModuleType

from lowerkit.coreml_preprocess import _upstream
from lowerkit.coreml_preprocess.versions import PROVEN_ON
from lowerkit.pass_infra.accelerations.lowering import accelerated_lowering
from lowerkit.pass_infra.accelerations.quantization import accelerated_quantization
from lowerkit.pass_infra.accelerations.versions import proven_scope

__all__ = ["STATIC_LLM_SCRIPT", "export_static_llm", "static_llm_script"]

STATIC_LLM_SCRIPT = _upstream.STATIC_LLM_SCRIPT


@contextlib.contextmanager
def _arguments(argv: Sequence[str]) -> Iterator[None]:
    """``sys.argv`` as the script's ``argparse`` reads it, for the block."""
    saved = sys.argv
    sys.argv = [STATIC_LLM_SCRIPT, *argv]
    try:
        yield
    finally:
        sys.argv = saved


def static_llm_script() -> ModuleType:
    """ExecuTorch's ``export_static_llm_coreml`` module with lowerkit's Core ML names (loaded once)."""
    from lowerkit.coreml_preprocess.backend import CoreMLBackend
    from lowerkit.coreml_preprocess.options import MultimethodWeightSharing
    from lowerkit.coreml_preprocess.partitioner import CoreMLPartitioner

    return _upstream.static_llm_script(CoreMLBackend, MultimethodWeightSharing, CoreMLPartitioner)


def export_static_llm(argv: Sequence[str]) -> None:
    """Run ``export_static_llm_coreml`` with its command-line arguments `argv`, lowerkit's way.

    A bad argument exits as ``argparse`` does (``SystemExit`` 2, its message on stderr).
    """
    script = static_llm_script()
    with proven_scope(
        "lowerkit-coreml-preprocess", PROVEN_ON, "export_static_llm", accelerated_quantization(), accelerated_lowering()
    ), _arguments(argv):  # fmt: skip
        script.main()
