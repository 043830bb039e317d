"""lowerkit's accelerated Arm lowering gives stock ExecuTorch's .pte bytes on every target family.

One lowering per family of ds_cnn, stock (tests/arm_targets/conftest.py, ExecuTorch's public
API only) and lowerkit, in this process: U55, U65, U85 at MAC counts the older tests do not
cover, TOSA INT a16w8, Ethos-U a16w8, and a Vela config file of the user's own with a
system config and memory mode that are not the target's defaults.
"""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from arm_targets.conftest import lowerkit_lowering, stock_pte

FAMILIES = [
    ("ethos-u55-64", False),
    ("ethos-u65-512", False),
    ("ethos-u85-1024", False),
    ("TOSA-1.0+INT+int16", True),
    ("ethos-u85-256", True),
]


@pytest.mark.parametrize(("target", "a16w8"), FAMILIES, ids=lambda v: str(v))
def test_same_pte_as_stock(target: str, a16w8: bool) -> None:
    fast = lowerkit_lowering(target, a16w8)
    assert fast.report is not None, "the accelerated pipeline did not run"
    assert fast.a16w8 == a16w8
    assert fast.pte == stock_pte(target, a16w8=a16w8)
    if target.startswith("ethos-u"):
        assert len(fast.vela_binaries) == 1 and fast.vela_binaries[0].startswith(b"vela_bin_stream\x00")
        flags = fast.compile_spec.compiler_flags
        assert f"--accelerator-config={target}" in flags


def _custom_ini(folder: Path) -> Path:
    """A copy of Vela's Arm/vela.ini with one more system config and memory mode of its own."""
    from ethosu.vela import architecture_features

    source = Path(architecture_features.CONFIG_FILES_PATH) / "Arm" / "vela.ini"
    target = folder / "board.ini"
    shutil.copyfile(source, target)
    with target.open("a") as file:
        file.write(
            "\n[System_Config.Board_U55_Slow_Flash]\ninherit=System_Config.Ethos_U55_Deep_Embedded\n"
            "OffChipFlash_clock_scale=0.03125\n"
            "\n[Memory_Mode.Board_Sram_128KB]\ninherit=Memory_Mode.Sram_Only\narena_cache_size=131072\n"
        )
    return target


@pytest.fixture(scope="module")
def board_ini(tmp_path_factory: pytest.TempPathFactory) -> str:
    return str(_custom_ini(tmp_path_factory.mktemp("vela")))


def test_same_pte_with_own_vela_config_system_config_and_memory_mode(board_ini: str) -> None:
    settings = {"system_config": "Board_U55_Slow_Flash", "memory_mode": "Board_Sram_128KB"}
    fast = lowerkit_lowering("ethos-u55-128", vela_config=board_ini, **settings)
    assert fast.pte == stock_pte("ethos-u55-128", config_ini=board_ini, **settings)
    flags = fast.compile_spec.compiler_flags
    assert f"--config={board_ini}" in flags and "--memory-mode=Board_Sram_128KB" in flags
    default = lowerkit_lowering("ethos-u55-128")
    assert fast.vela_binaries != default.vela_binaries, "the settings did not reach Vela"
