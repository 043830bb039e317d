"""The VGF targets find the ML SDK model converter, hand it to ExecuTorch for one lowering, and say so when missing."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pytest

from lowerkit.arm_passes import ArmLoweringError, compile_spec_for, converter, lower_to_arm
from lowerkit.arm_passes.converter import (
    ENV,
    converter_environment,
    locate_model_converter,
    packaged_model_converter,
)


def test_the_package_ships_an_executable_converter() -> None:
    binary = packaged_model_converter()
    assert binary is not None and binary.name.startswith("model-converter")
    assert binary.is_file() and os.access(binary, os.X_OK), binary


def test_the_packaged_converter_is_set_for_the_block_only(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(ENV, raising=False)
    with converter_environment() as binary:
        assert binary == packaged_model_converter()
        assert os.environ[ENV] == str(binary)
        from executorch.backends.arm.vgf.model_converter import require_model_converter_executable

        assert require_model_converter_executable() == binary
    assert ENV not in os.environ


def test_the_users_converter_wins_and_is_left_alone(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    mine = tmp_path / "model-converter"
    mine.write_text("#!/bin/sh\n")
    mine.chmod(0o755)
    monkeypatch.setenv(ENV, str(mine))
    with converter_environment() as binary:
        assert binary == mine and os.environ[ENV] == str(mine)
    assert os.environ[ENV] == str(mine)


def test_a_users_path_to_nothing_is_one_line_with_the_fix(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv(ENV, str(tmp_path / "missing"))
    with pytest.raises(ArmLoweringError) as info:
        locate_model_converter()
    text = str(info.value)
    assert "\n" not in text and "is not an executable file" in text and "unset it" in text


def test_no_converter_anywhere_names_the_package(monkeypatch: pytest.MonkeyPatch, tmp_path: Path, permute_net: Any) -> None:
    """The converter is looked for before any work: no quantization, no export."""
    monkeypatch.delenv(ENV, raising=False)
    monkeypatch.setattr(converter, "packaged_model_converter", lambda: tmp_path / "model-converter")
    monkeypatch.setenv("PATH", str(tmp_path))
    model, example, _ = permute_net
    with pytest.raises(ArmLoweringError) as info:
        lower_to_arm(model, example, "vgf-int", calibration=[object()])  # type: ignore[list-item]
    text = str(info.value)
    assert "\n" not in text and "pip install ai-ml-sdk-model-converter" in text and "missing" in text
    assert ENV not in os.environ


def test_vgf_specs_are_aot_arm_compilers_and_ignore_vela_settings_with_a_warning() -> None:
    from executorch.backends.arm.vgf import VgfCompileSpec

    for target, profile in (("vgf-int", "TOSA-1.0+INT"), ("vgf-fp", "TOSA-1.0+FP")):
        spec = compile_spec_for(target)
        assert isinstance(spec, VgfCompileSpec) and str(spec.tosa_spec) == profile
        assert spec.compiler_flags == []
    with pytest.warns(UserWarning, match="vgf-fp ignores them"):
        ignored = compile_spec_for("vgf-fp", system_config="Ethos_U55_High_End_Embedded")
    assert ignored == compile_spec_for("vgf-fp")


def test_the_converter_lookup_and_the_package_import_no_torch() -> None:
    """The lowering cache's key finds the converter with `find_model_converter` on a cache hit,
    which imports neither torch nor ExecuTorch (the package facade loads its names on first use)."""
    import subprocess
    import sys

    code = "import sys, lowerkit.arm_passes.converter as c; c.find_model_converter(); print(sorted(sys.modules))"
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    loaded = done.stdout.split("'")
    assert "lowerkit.arm_passes.converter" in loaded
    assert not [m for m in loaded if m.split(".")[0] in ("torch", "executorch")]


def test_find_model_converter_says_where_the_converter_comes_from(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    mine = tmp_path / "mine"
    monkeypatch.setenv(ENV, str(mine))
    assert converter.find_model_converter() == ("user", mine)
    monkeypatch.delenv(ENV)
    assert converter.find_model_converter() == ("packaged", packaged_model_converter())
    monkeypatch.setattr(converter, "packaged_model_converter", lambda: None)
    monkeypatch.setenv("PATH", str(tmp_path))
    assert converter.find_model_converter() == ("none", None)
