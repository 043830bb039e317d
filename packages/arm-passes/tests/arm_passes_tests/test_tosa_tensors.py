"""A TOSA tensor's values in torch's layout (numerics.tosa_tensors), on layouts small spatial sizes make ambiguous,
and which torch node a TRANSPOSE's tensor stands for.

At 2x2 an NHWC tensor and its H/W-swapped reading both fit the torch shape: the graph's layout
(``axes``) must decide, and the torch value only break a tie it leaves.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
import torch
from torch.fx.traceback import NodeSource

from lowerkit.arm_passes.numerics.tosa_tensors import TosaTensor, tosa_tensors

NCHW = (1, 8, 2, 2)


def _nhwc(axes: tuple[int, ...] = (0, 2, 3, 1)) -> TosaTensor:
    return TosaTensor("t", (1, 2, 2, 8), torch.int8, frozenset(), axes)


def _torch_value() -> np.ndarray:
    return np.arange(np.prod(NCHW), dtype=np.int64).reshape(NCHW) - 16


def test_a_2x2_nhwc_tensor_reads_back_as_the_torch_value() -> None:
    value = _torch_value()
    device = value.transpose(0, 2, 3, 1)  # what TOSA holds
    assert np.array_equal(_nhwc().to_torch_layout(device, NCHW), value)
    assert np.array_equal(_nhwc().to_torch_layout(device, NCHW, like=value), value)


def test_a_few_quanta_of_difference_do_not_swap_h_and_w() -> None:
    value = _torch_value()
    device = value.transpose(0, 2, 3, 1).copy()
    device[0, 1, 0, :] += 3  # TOSA rounds some values otherwise
    read = _nhwc().to_torch_layout(device, NCHW, like=value)
    assert read is not None and int(np.abs(read - value).max()) == 3


def test_a_1x1_nhwc_tensor_of_another_rank_is_the_same_bytes() -> None:
    tensor = TosaTensor("t", (1, 1, 1, 8), torch.int8, frozenset(), (0, 2, 3, 1))
    value = np.arange(8).reshape(1, 8)
    assert np.array_equal(tensor.to_torch_layout(value.reshape(1, 1, 1, 8), (1, 8), like=value), value)


# Stand-ins for the TOSA ops of a captured graph (tosa_tensors reads their names).
def CONV2D(x: Any) -> Any: ...
def ADD(x: Any, y: Any) -> Any: ...
def TRANSPOSE(x: Any, perm: Any) -> Any: ...
def RESHAPE(x: Any, shape: Any) -> Any: ...


def _graph_after_the_pipeline(size: int) -> torch.fx.GraphModule:
    """conv + x, then a permute, in NHWC at `size` x `size` spatial: the conv's NHWC -> NCHW
    layout change (a TRANSPOSE; a RESHAPE at 1x1) sits after the add, where
    ``RemovePermutesAroundElementwiseOps`` moves it, still named after the conv."""
    program = torch.fx.Graph()  # the lowered program's nodes, which the provenance names
    made_from = {name: [NodeSource(program.placeholder(name))] for name in ("conv", "add", "permute")}
    graph = torch.fx.Graph()
    nchw, nhwc = (1, 8, size, size), (1, size, size, 8)

    def op(target: Any, args: tuple[Any, ...], shape: tuple[int, ...], source: str) -> torch.fx.Node:
        node = graph.call_function(target, args)
        node.meta.update(val=torch.empty(shape, dtype=torch.int8), from_node=made_from[source])
        return node

    x = graph.placeholder("x")
    x.meta["val"] = torch.empty(nchw, dtype=torch.int8)
    x_nhwc = op(TRANSPOSE, (x, [0, 2, 3, 1]), nhwc, "conv")  # made for the conv, before it
    conv = op(CONV2D, (x_nhwc,), nhwc, "conv")
    add = op(ADD, (conv, x_nhwc), nhwc, "add")
    layout, argument = (TRANSPOSE, [0, 3, 1, 2]) if size > 1 else (RESHAPE, list(nchw))
    add_nchw = op(layout, (add, argument), nchw, "conv")  # the conv's, moved past the add
    permuted = op(TRANSPOSE, (add_nchw, [0, 1, 3, 2]), nchw, "permute")  # a torch permute's
    graph.output(permuted)
    return torch.fx.GraphModule(torch.nn.Module(), graph)


@pytest.mark.parametrize("size", [2, 1])
def test_a_layout_change_moved_past_an_add_holds_the_add_not_the_conv(size: int) -> None:
    layout = "transpose_1" if size > 1 else "reshape"
    sources = {t.name: set(t.sources) for t in tosa_tensors(_graph_after_the_pipeline(size))}
    assert sources == {
        "transpose": {"conv"},  # the conv's input layout transpose: nothing computed the conv yet
        "conv2d": {"conv"},
        "add": {"add"},
        layout: {"add"},
        "transpose_2" if size > 1 else "transpose_1": {"permute"},
    }
