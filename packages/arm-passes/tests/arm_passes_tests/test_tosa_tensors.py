"""A TOSA tensor's values in torch's layout (numerics.tosa_tensors), on layouts small spatial sizes make ambiguous.

At 2x2 an NHWC tensor and its H/W-swapped reading both fit the torch shape: the graph's layout
(``axes``) must decide, and the torch value only break a tie it leaves.
"""

from __future__ import annotations

import numpy as np
import torch

from lowerkit.arm_passes.numerics.tosa_tensors import TosaTensor

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
