"""Several threads running PassPipelines at once get the sequential results; nothing stays patched."""

from __future__ import annotations

import copy
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import torch
from executorch.exir import to_edge

from lowerkit.pass_infra import PassPipeline, TargetedPass, cheaper_replay
from lowerkit.pass_infra._upstream import fake_state_snapshot, replay_state_snapshot
from lowerkit.pass_infra.accelerations.cheaper_replay import CHEAP_REPLAY
from lowerkit.pass_infra.accelerations.fake_cache import FAKE_CACHE


class _Net(torch.nn.Module):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = torch.relu(x * 2.0 + 1.0)
        return torch.sigmoid(y.sum(dim=-1, keepdim=True) - y)


class _ReluToClamp(TargetedPass):
    targeted_ops = None

    def call_operator(self, op: Any, args: Any, kwargs: Any, meta: Any) -> Any:
        if "relu" in str(op):
            from executorch.exir.dialects._ops import ops as exir_ops

            return super().call_operator(exir_ops.edge.aten.clamp.default, (args[0], 0.0), {}, meta)
        return super().call_operator(op, args, kwargs, meta)


def _graph() -> torch.fx.GraphModule:
    program = to_edge(torch.export.export(_Net(), (torch.randn(2, 8),))).exported_program()
    return program.graph_module


def _run(gm: torch.fx.GraphModule) -> str:
    passes = [_ReluToClamp(), _ReluToClamp()]
    out, _ = PassPipeline(passes).run(gm)
    return str(out.code) + "\n".join(f"{n.name}:{n.meta.get('val')}" for n in out.graph.nodes)


def test_threads_get_sequential_results_and_originals_are_back() -> None:
    replay, cache = replay_state_snapshot(), fake_state_snapshot()
    base = _graph()
    expected = _run(copy.deepcopy(base))
    inputs = [copy.deepcopy(base) for _ in range(4)]

    def work(graph: torch.fx.GraphModule) -> str:
        with cheaper_replay():  # an accelerated scope around the entry point, nested
            return _run(graph)

    with ThreadPoolExecutor(max_workers=len(inputs)) as pool:  # a thread's error is raised here
        results = list(pool.map(work, inputs))
    assert results == [expected] * len(inputs)
    after = replay_state_snapshot()
    assert all(after[k] is replay[k] for k in replay if k != "current_meta")
    now = fake_state_snapshot()
    assert all(now[k] is cache[k] for k in cache if k != "cache")
    assert not CHEAP_REPLAY.installed and not FAKE_CACHE.installed


_IMPORT_CHECK = """
import sys, torch, executorch.exir.pass_base as pb, torch._library.utils as lu
import torch._subclasses.fake_tensor as ft
def state():
    B = pb._ExportPassBase
    return [vars(B.ExportInterpreter)["run_node"], vars(B)["_fx"], vars(B)["call_submodule"],
            vars(B.ExportTracer)["set_metadata"], vars(pb.ExportPass.ExportTracer)["create_arg"],
            vars(B).get("node_debug_str"), lu.is_builtin, vars(ft.FakeTensorMode)["_validate_cache_key"],
            ft._set_cache_key, ft._set_cache_key_for_shape_env, len(ft.FakeTensorMode.cache),
            list(sys.meta_path)]
before = state()
import lowerkit.pass_infra
after = state()
assert len(before) == len(after) and all(a is b or a == b for a, b in zip(before, after)), (before, after)
print("unchanged")
"""


def test_importing_the_package_patches_nothing() -> None:
    done = subprocess.run(
        [sys.executable, "-c", _IMPORT_CHECK], capture_output=True, text=True, env=_env()
    )
    assert done.returncode == 0 and "unchanged" in done.stdout, done.stderr[-3000:]


def _env() -> dict[str, str]:
    import os

    return {**os.environ, "PYTHONPATH": os.pathsep.join(p for p in sys.path if p)}
