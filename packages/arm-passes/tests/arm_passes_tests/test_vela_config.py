"""Vela config files: names read as Vela reads them, and settings checked before any lowering work."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

from lowerkit.arm_passes import ArmLoweringError, compile_spec_for, lower_to_arm
from lowerkit.arm_passes.vela_config import read_vela_config, resolve_vela_config, vela_flag


def test_default_config_is_velas_own_arm_vela_ini() -> None:
    config = read_vela_config(None)
    assert config.path.parts[-2:] == ("Arm", "vela.ini") and config.path.is_file()
    assert "Ethos_U55_High_End_Embedded" in config.system_configs and "Shared_Sram" in config.memory_modes
    # Dedicated_Sram_384KB inherits Dedicated_Sram and sets its own size.
    assert config.arena_cache_sizes["Dedicated_Sram_384KB"] == 384 * 1024
    assert "Shared_Sram" not in config.arena_cache_sizes


def test_missing_or_misnamed_files_are_one_line(tmp_path: Path) -> None:
    with pytest.raises(ArmLoweringError, match=r"does not exist; give the path of a vela\.ini"):
        resolve_vela_config(tmp_path / "nope.ini")
    with pytest.raises(ArmLoweringError, match=r"must be a \.ini file"):
        resolve_vela_config(tmp_path / "vela.cfg")


def test_two_part_names_are_read_from_velas_folder_as_vela_does(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    (tmp_path / "boards").mkdir()
    (tmp_path / "boards" / "board.ini").write_text("[System_Config.Board]\n")
    monkeypatch.chdir(tmp_path)
    with pytest.raises(ArmLoweringError, match=r"two-part names from its own config folder; write '\./boards/board\.ini'"):
        resolve_vela_config("boards/board.ini")
    assert read_vela_config("./boards/board.ini").system_configs == ("Board",)


def test_settings_reach_the_compile_spec_as_vela_flags(tmp_path: Path) -> None:
    spec = compile_spec_for("ethos-u65-256", system_config="Ethos_U65_Mid_End", memory_mode="Dedicated_Sram")
    assert vela_flag(spec.compiler_flags, "system-config") == "Ethos_U65_Mid_End"
    assert vela_flag(spec.compiler_flags, "memory-mode") == "Dedicated_Sram"
    assert vela_flag(spec.compiler_flags, "accelerator-config") == "ethos-u65-256"
    with pytest.raises(ArmLoweringError, match=r"apply to Ethos-U targets"):
        compile_spec_for("TOSA-1.0+INT", memory_mode="Sram_Only")


def test_unknown_names_and_int16_are_refused_before_export() -> None:
    model, inputs = torch.nn.Conv2d(1, 8, 3), (torch.ones(1, 1, 8, 8),)
    with pytest.raises(ArmLoweringError, match=r"unknown memory mode 'Sram_Plenty'.*Shared_Sram"):
        lower_to_arm(model, inputs, "ethos-u55-128", memory_mode="Sram_Plenty")
    with pytest.raises(ArmLoweringError, match=r"a16w8 needs a target with the int16 extension.*TOSA-1\.0\+INT\+int16"):
        lower_to_arm(model, inputs, "TOSA-1.0+INT", a16w8=True)
