"""The layout transposes of zoo lowerings, split into delegate-boundary and internal ones.

Uses tests/arm's cached TOSA INT lowerings (tests/arm/test_sameness.py makes them), so it adds
no lowering of its own. Stock's transposes are the same: test_sameness checks the same .pte.
"""

from __future__ import annotations

from arm.conftest import lowered


def test_cnn9_layernorm_has_one_input_transpose_and_two_per_layernorm() -> None:
    """NCHW input -> NHWC once at the delegate's input; each of the 9 channel LayerNorms works on
    the channel axis, so the pipeline transposes to NCHW and back around it (18 inside)."""
    fast = lowered("cnn9_layernorm", "TOSA-1.0+INT")
    split = fast.layout_transposes
    assert split.counts() == {"delegate_boundary": 1, "delegate_internal": 18, "cpu_boundary": 0, "cpu_internal": 0}
    assert not set(split.delegate_boundary) & set(split.delegate_internal)


def test_a_one_channel_input_needs_no_layout_transpose() -> None:
    """ds_cnn's input is (1, 1, 49, 10): NCHW and NHWC are the same bytes, and its output is 2-D."""
    assert lowered("ds_cnn", "TOSA-1.0+INT").layout_transposes.counts() == dict.fromkeys(
        ("delegate_boundary", "delegate_internal", "cpu_boundary", "cpu_internal"), 0
    )
    assert lowered("resnet8", "TOSA-1.0+INT").layout_transposes.counts()["delegate_boundary"] == 1
