"""The incremental permute-propagation passes leave exactly the graph upstream's leave, with fewer re-runs."""

from __future__ import annotations

import copy
from typing import Any

import pytest
import torch
from executorch.exir.pass_base import ExportPass

from arm_passes_tests.conftest import graph_signature
from lowerkit.arm_passes import (
    IncrementalPropagateViewCopyPermuteDownPass,
    IncrementalPropagateViewCopyPermuteUpPass,
    _upstream,
    arm_pipeline_passes,
    lower_to_arm,
)
from lowerkit.arm_passes.incremental import incremental_version
from lowerkit.arm_passes.runner import run_fast_pipeline

UPSTREAM = {
    "down": _upstream.PropagateViewCopyPermuteDownPass,
    "up": _upstream.PropagateViewCopyPermuteUpPass,
}


def _count_replays(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    counter = [0]
    original = ExportPass.call

    def counting(self: Any, graph_module: Any) -> Any:
        counter[0] += 1
        return original(self, graph_module)

    monkeypatch.setattr(ExportPass, "call", counting)
    return counter


@pytest.fixture(scope="module", params=["TOSA-1.0+INT", "TOSA-1.0+FP"])
def before_propagation(request: Any, permute_net: Any) -> tuple[Any, list[Any], int, Any]:
    """The backend program of PermuteNet and its pass list, run up to the first propagation pass."""
    model, example, calibration = permute_net
    captured: list[Any] = []
    with _upstream.capture_backend_inputs(captured):
        lower_to_arm(model, example, request.param, calibration=calibration, stock=True)
    program, compile_spec = captured[0]
    passes = _upstream.build_pass_list(compile_spec, program)
    first = next(i for i, p in enumerate(passes) if isinstance(p, UPSTREAM["down"]))
    with _upstream.tosa_context(compile_spec, program.graph_module):
        transformed, _ = run_fast_pipeline(passes[:first], program)
    return transformed, passes, first, compile_spec


def _run(graph_pass: Any, program: Any) -> Any:
    graph_pass.exported_program = program
    result = graph_pass(program.graph_module)
    return result


@pytest.mark.parametrize("direction", ["down", "up"])
def test_incremental_pass_equals_upstream(
    before_propagation: tuple[Any, list[Any], int, Any],
    direction: str,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    program, passes, first, compile_spec = before_propagation
    with _upstream.tosa_context(compile_spec, program.graph_module):
        _check_against_upstream(program, passes, first, direction, monkeypatch)


def _check_against_upstream(
    program: Any, passes: list[Any], first: int, direction: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    index = first if direction == "down" else first + 1
    upstream_pass = passes[index]
    assert isinstance(upstream_pass, UPSTREAM[direction])
    start = copy.deepcopy(program)
    if direction == "up":  # the Up pass runs on the Down pass's output, as in the pipeline
        down = _run(copy.copy(passes[first]), start)
        if down.modified:
            _upstream.update_after_graph_pass(start, down.graph_module)

    replays = _count_replays(monkeypatch)
    reference_program = copy.deepcopy(start)
    reference = _run(copy.copy(upstream_pass), reference_program)
    stock_replays = replays[0]

    replays[0] = 0
    incremental = incremental_version(copy.copy(upstream_pass))
    assert isinstance(
        incremental,
        IncrementalPropagateViewCopyPermuteDownPass if direction == "down" else IncrementalPropagateViewCopyPermuteUpPass,
    )
    fast = _run(incremental, copy.deepcopy(start))
    fast_replays = replays[0]

    assert fast.modified == reference.modified
    if direction == "down":
        assert reference.modified, "PermuteNet should give the Down pass work to do"
    assert graph_signature(fast.graph_module) == graph_signature(reference.graph_module)
    assert fast.graph_module.code == reference.graph_module.code
    if reference.modified:
        # Stock's fixpoint replays the whole graph until a round changes nothing (at least twice
        # when it changed something); the incremental version replays at most once.
        assert fast_replays <= 1 < stock_replays, (fast_replays, stock_replays)


def test_incremental_version_keeps_state() -> None:
    passes = arm_pipeline_passes("TOSA-1.0+INT")
    for graph_pass in passes:
        replacement = incremental_version(graph_pass)
        if replacement is graph_pass:
            continue
        assert isinstance(replacement, type(graph_pass))
        assert replacement.compile_spec is graph_pass.compile_spec
        assert replacement.exported_program is graph_pass.exported_program
        assert replacement._permute_targets == graph_pass._permute_targets


def test_graph_signature_sees_a_changed_graph(permute_net: Any) -> None:
    """The comparison used above can fail: a renamed node changes it."""
    model, example, _ = permute_net
    gm = torch.export.export(model, example).graph_module
    other = copy.deepcopy(gm)
    node = next(n for n in other.graph.nodes if n.op == "call_function")
    node.name = node.name + "_renamed"
    assert graph_signature(gm) != graph_signature(other)


def test_refresh_keeps_vouches_of_unchanged_nodes_only(permute_net: Any) -> None:
    """Putting uses in graph order leaves args as they are, so pass-infra's vouch for a node that
    had it holds (the closing re-run copies it); a node edited after the vouch gets none."""
    from lowerkit.arm_passes.incremental import _Refresher
    from lowerkit.pass_infra.accelerations.replay_engine import is_vouched, vouch_graph

    model, example, _ = permute_net
    gm = torch.export.export(model, example).graph_module
    vouch_graph(gm)
    calls = [n for n in gm.graph.nodes if n.op == "call_function"]
    edited, stale = calls[-1], calls[-2]
    edited.args = (*edited.args[:-1], edited.args[-1])  # same content, re-assigned after the vouch
    stale.meta["val"] = stale.meta["val"].clone()  # a value the vouch did not see
    kept = [n for n in gm.graph.nodes if is_vouched(n)]
    lost = [n for n in gm.graph.nodes if not is_vouched(n)]  # the two, and the stale one's users
    assert edited in lost and stale in lost and len(kept) > len(lost)
    args_before = {n: n.args for n in gm.graph.nodes}

    _Refresher._canonicalize_uses(gm)

    assert all(n.args is args_before[n] for n in gm.graph.nodes)
    assert all(is_vouched(n) for n in kept)
    assert not any(is_vouched(n) for n in lost)


class _SharedValue(torch.nn.Module):
    def forward(self, x: torch.Tensor) -> tuple[torch.Tensor, ...]:
        y = torch.relu(x).permute(1, 0)
        return y + 1, y * 2, torch.cat([y, y])


def test_uses_are_put_in_the_order_re_registering_every_use_gives() -> None:
    """The users of a node whose uses were re-registered out of graph order end in graph order,
    the order re-assigning every node's args (a fresh trace's) gives, and inputs keep theirs."""
    from lowerkit.arm_passes.incremental import _Refresher

    gm = torch.export.export(_SharedValue(), (torch.randn(3, 4),)).graph_module
    shared = next(n for n in gm.graph.nodes if len(n.users) > 1)
    first_user = next(iter(shared.users))
    first_user.args = first_user.args  # re-registered: now this user comes last
    assert list(shared.users)[-1] is first_user
    reference = copy.deepcopy(gm)
    for node in reference.graph.nodes:
        node.args = node.args

    def orders(module: torch.fx.GraphModule) -> list[tuple[list[str], list[str]]]:
        return [([u.name for u in n.users], [i.name for i in n.all_input_nodes]) for n in module.graph.nodes]

    _Refresher._canonicalize_uses(gm)

    assert orders(gm) == orders(reference)
    assert next(iter(shared.users)) is first_user


def test_first_refresh_dispatches_only_what_is_not_vouched(
    permute_net: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A refresh re-dispatches an edited node; nodes pass-infra vouches for keep their values."""
    from lowerkit.arm_passes import incremental
    from lowerkit.pass_infra.accelerations.replay_engine import vouch_graph

    model, example, _ = permute_net
    gm = torch.export.export(model, example).graph_module
    vouch_graph(gm)
    edited = [n for n in gm.graph.nodes if n.op == "call_function"][-1]
    edited.args = edited.args  # re-assigned after the vouch: must be recomputed
    values = {n: n.meta.get("val") for n in gm.graph.nodes}
    dispatched: list[Any] = []
    original = incremental.indistinguishable

    def counting(old: Any, new: Any) -> bool:  # called once after each dispatch
        dispatched.append(old)
        return original(old, new)

    monkeypatch.setattr(incremental, "indistinguishable", counting)
    incremental._Refresher(False).refresh(gm)

    assert dispatched == [values[edited]]
    unchanged = [n for n in gm.graph.nodes if n.op not in ("output",) and n is not edited]
    assert all(n.meta.get("val") is values[n] for n in unchanged)
