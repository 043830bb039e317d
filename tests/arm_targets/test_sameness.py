"""lowerkit's accelerated Arm lowering gives stock ExecuTorch's .pte bytes on every target family.

One lowering per family of ds_cnn, stock (tests/arm_targets/conftest.py, ExecuTorch's public
API only) and lowerkit, in this process, at MAC counts tests/arm does not cover: U55 (int8),
U85 (a16w8: int16 activations on the NPU), TOSA INT a16w8 (TOSA-1.0+INT+int16), and U65 with a
Vela config file of the user's own and a system config and memory mode that are not the
target's defaults (nor in Vela's file).
"""

from __future__ import annotations

import pytest

from arm_targets.conftest import (
    BOARD_MEMORY_MODE,
    BOARD_SYSTEM_CONFIG,
    board_ini,
    lowerkit_lowering,
    stock_pte,
)

FAMILIES = [
    ("ethos-u55-64", False),
    ("ethos-u85-1024", True),
    ("TOSA-1.0+INT+int16", True),
]


@pytest.mark.parametrize(("target", "a16w8"), FAMILIES, ids=lambda v: str(v))
def test_same_pte_as_stock(target: str, a16w8: bool) -> None:
    fast = lowerkit_lowering(target, a16w8)
    assert fast.report is not None, "the accelerated pipeline did not run"
    assert fast.a16w8 == a16w8
    assert fast.pte == stock_pte(target, a16w8=a16w8)
    if target.startswith("ethos-u"):
        assert len(fast.vela_binaries) == 1 and fast.vela_binaries[0].startswith(b"vela_bin_stream\x00")
        assert f"--accelerator-config={target}" in fast.compile_spec.compiler_flags


def test_same_pte_with_own_vela_config_system_config_and_memory_mode() -> None:
    settings = {"system_config": BOARD_SYSTEM_CONFIG, "memory_mode": BOARD_MEMORY_MODE}
    fast = lowerkit_lowering("ethos-u65-512", vela_config=board_ini(), **settings)
    assert fast.report is not None
    assert fast.pte == stock_pte("ethos-u65-512", config_ini=board_ini(), **settings)
    flags = fast.compile_spec.compiler_flags
    assert f"--config={board_ini()}" in flags and f"--memory-mode={BOARD_MEMORY_MODE}" in flags
