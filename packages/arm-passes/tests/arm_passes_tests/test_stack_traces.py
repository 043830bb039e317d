"""STACK_TRACES gives the Arm passes the same ``stack_trace`` lines as stock, from two frames."""

from __future__ import annotations

import inspect
import sys
import threading
import traceback
from typing import Any

import pytest
import torch
from executorch.backends.arm._passes import arm_pass, arm_pass_utils
from executorch.exir.dialects._ops import ops as exir_ops

from lowerkit.arm_passes._upstream_stack_traces import (
    STACK_TRACE_USERS,
    STACK_TRACES,
    innermost_entries,
)


def _stock_and_ours() -> tuple[list[str], list[str]]:
    """This frame's caller chain formatted the stock way and the fast way (same frame)."""
    frame = sys._getframe(1)
    return traceback.format_stack(frame), innermost_entries(frame)


def _recurse(depth: int) -> tuple[list[str], list[str]]:
    if depth > 0:
        return _recurse(depth - 1)  # one line repeated: stock folds the run after three
    return _stock_and_ours()


def _leaf() -> tuple[list[str], list[str]]:
    return _stock_and_ours()


@pytest.mark.parametrize("depth", [0, 1, 2, 3, 4, 5, 12])
def test_the_innermost_entries_are_stocks_last_entries(depth: int) -> None:
    stock, ours = _recurse(depth)
    assert len(ours) >= 2
    assert ours == stock[-len(ours):]
    if depth >= 4:  # the run is folded: stock's [-2] is the "repeated" line
        assert ours[-2].strip().startswith("[Previous line repeated")


def test_a_chain_without_repeats() -> None:
    stock, ours = _leaf()
    assert ours == stock[-len(ours):] and len(ours) == 2


def _create_node(graph: torch.fx.Graph) -> torch.fx.Node:
    """Upstream's create_node, called from one line (its caller is the frame it records)."""
    return arm_pass_utils.create_node(graph, exir_ops.edge.aten.neg.default, args=())


def _made_stack_trace() -> str:
    return str(_create_node(torch.fx.Graph()).meta["stack_trace"])


def test_create_node_records_the_same_stack_trace_in_scope() -> None:
    stock = _made_stack_trace()
    with STACK_TRACES.scope():
        assert isinstance(arm_pass_utils.traceback.format_stack, type(innermost_entries))
        assert arm_pass_utils.traceback is not traceback
        ours = _made_stack_trace()
    assert ours == stock and "_create_node" in ours
    assert arm_pass_utils.traceback is traceback and arm_pass.traceback is traceback


def test_other_threads_and_other_calls_get_the_whole_stack() -> None:
    results: dict[str, int] = {}
    with STACK_TRACES.scope():
        stand_in = arm_pass_utils.traceback
        thread = threading.Thread(target=lambda: results.update(other=len(stand_in.format_stack())))
        thread.start()
        thread.join()
        whole = len(traceback.format_stack())
        assert len(stand_in.format_stack(sys._getframe())) == whole
        assert len(stand_in.format_stack(limit=50)) == min(whole, 50)
        assert len(stand_in.format_stack()) == 2
        assert stand_in.extract_stack is traceback.extract_stack
    assert results["other"] > 2


@pytest.mark.parametrize("module", list(STACK_TRACE_USERS), ids=lambda m: m.__name__)
def test_upstreams_only_use_of_traceback_is_the_guarded_one(module: Any) -> None:
    """The stand-in is exact for ``format_stack()[-2]`` only: each module uses its ``traceback``
    once, there, in the function whose source hash guards the patch."""
    user: Any = module
    for part in STACK_TRACE_USERS[module].split("."):
        user = getattr(user, part)
    assert inspect.getsource(module).count("traceback.") == 1
    assert "traceback.format_stack()[-2]" in inspect.getsource(user)
