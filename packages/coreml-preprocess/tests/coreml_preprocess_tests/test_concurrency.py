"""Core ML preprocess from several threads: the sequential bytes; coremltools left stock."""

from __future__ import annotations

import os
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import torch
from coremltools.converters import _converters_entry
from coremltools.converters.mil.mil.passes.pass_pipeline import PassPipelineManager
from executorch.exir import to_edge

from lowerkit.coreml_compiler_ops import is_registered
from lowerkit.coreml_preprocess import CoreMLBackend, CoreMLCompileOptions
from lowerkit.coreml_preprocess._upstream_faster_conversion import FASTER_CONVERSION
from lowerkit.coreml_preprocess.scope import COREML_SCOPE


class _Small(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        torch.manual_seed(0)
        self.linear = torch.nn.Linear(8, 8)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.relu(self.linear(x)) * 2.0


def _edge() -> Any:
    return to_edge(torch.export.export(_Small().eval(), (torch.randn(1, 8),))).exported_program()


def test_threads_preprocess_to_the_sequential_bytes() -> None:
    apply_pipeline = PassPipelineManager.__dict__["apply_pipeline"]
    collector = _converters_entry.gc
    meta_path = list(sys.meta_path)
    registered = is_registered()
    specs = CoreMLCompileOptions().to_compile_specs()
    programs = [_edge() for _ in range(4)]
    expected = CoreMLBackend.preprocess(programs[0], specs).processed_bytes

    def work(program: Any) -> bytes:
        return CoreMLBackend.preprocess(program, specs).processed_bytes

    with ThreadPoolExecutor(max_workers=3) as pool:  # a thread's error is raised here
        results = list(pool.map(work, programs[1:]))
    assert results == [expected] * 3
    assert PassPipelineManager.__dict__["apply_pipeline"] is apply_pipeline
    assert _converters_entry.gc is collector
    assert sys.meta_path == meta_path and is_registered() == registered
    assert not FASTER_CONVERSION.installed and not COREML_SCOPE.installed


_IMPORT_CHECK = """
import sys
from coremltools.converters import _converters_entry
from coremltools.converters.mil.mil.passes.pass_pipeline import PassPipelineManager
from coremltools.converters.mil.frontend.torch.torch_op_registry import _TORCH_OPS_REGISTRY as R
def state():
    return [PassPipelineManager.__dict__["apply_pipeline"], _converters_entry.gc,
            list(sys.meta_path), dict(R.name_to_func_mapping), "register_func" in vars(R)]
before = state()
import lowerkit.coreml_preprocess as p
p.CoreMLCompileOptions(minimum_deployment_target="iOS18")
p.CoreMLPartitioner()
after = state()
assert all(a is b or a == b for a, b in zip(before, after)), [
    i for i, (a, b) in enumerate(zip(before, after)) if not (a is b or a == b)]
print("unchanged")
"""


def test_importing_the_package_patches_nothing() -> None:
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(p for p in sys.path if p)}
    done = subprocess.run([sys.executable, "-c", _IMPORT_CHECK], capture_output=True, text=True, env=env)
    assert done.returncode == 0 and "unchanged" in done.stdout, done.stderr[-3000:]
