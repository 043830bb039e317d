"""Ethos-U options: wrong combinations and names are one line with the fix, before or at the start of work."""

from __future__ import annotations

from pathlib import Path

import pytest

from cli_tests.test_errors import assert_nothing_written, assert_one_line_error
from lowerkit.cli import targets
from lowerkit.cli.sizes import parse_size


@pytest.fixture
def out(tmp_path: Path) -> Path:
    folder = tmp_path / "out"
    folder.mkdir()
    return folder / "model.pte"


def test_cli_lists_every_arm_target_lowerkit_lowers() -> None:
    from lowerkit.arm_passes import ARM_TARGETS
    from lowerkit.cli.backends.arm.targets import ARM_TARGET_NAMES

    assert sorted(ARM_TARGET_NAMES.values()) == sorted(ARM_TARGETS)
    assert set(ARM_TARGET_NAMES) == {name for name, t in targets.TARGETS.items() if t.backend == "arm"}


def test_missing_vela_config_file(lowerkit, out):
    outcome = lowerkit("lower", "zoo:ds_cnn", "-t", "ethos-u55-128", "-o", str(out), "--vela-config", "nope.ini")
    assert_one_line_error(outcome, 2, "Vela config file 'nope.ini' does not exist")
    assert_nothing_written(out.parent)


def test_unknown_system_config_lists_the_config_files_own(lowerkit, out):
    outcome = lowerkit("lower", "zoo:ds_cnn", "-t", "ethos-u55-128", "-o", str(out), "--system-config", "Ethos_U55_Tiny", "-q")
    assert_one_line_error(
        outcome, 2, "unknown system config 'Ethos_U55_Tiny'", "Ethos_U55_High_End_Embedded", "Ethos_U85_SYS_DRAM_Mid"
    )
    assert_nothing_written(out.parent)


def test_unknown_memory_mode_lists_those_of_the_given_file(lowerkit, out, tmp_path):
    ini = tmp_path / "board.ini"
    ini.write_text(
        "[System_Config.Board]\ncore_clock=100e6\naxi0_port=Sram\naxi1_port=OffChipFlash\n"
        "[Memory_Mode.Board_Shared]\nconst_mem_area=Axi1\narena_mem_area=Axi0\ncache_mem_area=Axi0\n"
    )
    outcome = lowerkit(
        "lower", "zoo:ds_cnn", "-t", "ethos-u85-512", "-o", str(out), "--vela-config", str(ini),
        "--system-config", "Board", "--memory-mode", "Shared_Sram", "-q",
    )
    assert_one_line_error(outcome, 2, "unknown memory mode 'Shared_Sram'", f"{ini} has: Board_Shared")
    assert_nothing_written(out.parent)


def test_defaults_missing_from_own_config_are_named(lowerkit, out, tmp_path):
    ini = tmp_path / "board.ini"
    ini.write_text("[System_Config.Board]\ncore_clock=100e6\n[Memory_Mode.Board_Shared]\narena_mem_area=Axi0\n")
    outcome = lowerkit("lower", "zoo:ds_cnn", "-t", "ethos-u55-64", "-o", str(out), "--vela-config", str(ini), "-q")
    assert_one_line_error(outcome, 2, "unknown system config 'Ethos_U55_High_End_Embedded'", "has: Board")


@pytest.mark.parametrize(
    ("args", "fragments"),
    [
        (("-t", "tosa-int", "--system-config", "X"), ("--system-config applies to Ethos-U targets", "'tosa-int'")),
        (("-t", "tosa-int", "--a16w8"), ("--a16w8 applies to Ethos-U targets", "use -t tosa-int16")),
        (("-t", "coreml", "--bundle", "m.bpte"), ("--bundle applies to Arm targets",)),
        (("-t", "ethos-u55-128", "--bundle", "m.pte"), ("name it", "m.bpte")),
        (("-t", "ethos-u55-128", "--sram-budget", "lots"), ("--sram-budget 'lots' is not a size",)),
        (("-t", "tosa-fp", "--flash-budget", "1MiB"), ("--flash-budget applies to Ethos-U targets",)),
        (("-t", "vgf-int", "--sram-budget", "1MiB"), ("--sram-budget applies to Ethos-U targets", "'vgf-int'")),
        (("-t", "vgf-fp", "--flash-budget", "1MiB"), ("--flash-budget applies to Ethos-U targets",)),
        (("-t", "vgf-int", "--a16w8"), ("--a16w8 applies to Ethos-U targets", "TOSA-1.0+INT, which has no int16")),
    ],
)
def test_options_that_do_not_fit_the_target(lowerkit, out, args, fragments):
    outcome = lowerkit("lower", "zoo:ds_cnn", "-o", str(out), *args)
    assert_one_line_error(outcome, 2, *fragments)
    assert_nothing_written(out.parent)


def test_sizes() -> None:
    assert parse_size("512KiB", "--x") == 512 * 1024
    assert parse_size("2M", "--x") == 2 * 1024**2
    assert parse_size("1.5 MiB", "--x") == 1536 * 1024
    assert parse_size("65536", "--x") == 65536


def test_targets_lists_the_vgf_targets(lowerkit):
    outcome = lowerkit("targets")
    assert outcome.code == 0, outcome.err
    rows = {line.split()[0]: line for line in outcome.out.splitlines()}
    assert "TOSA-1.0+INT" in rows["vgf-int"] and "model converter" in rows["vgf-int"]
    assert "TOSA-1.0+FP" in rows["vgf-fp"]


def test_vela_settings_are_ignored_by_vgf_with_a_warning(lowerkit, out, tmp_path):
    """aot_arm_compiler takes --system-config / --memory-mode / --config for `vgf` and ignores them: so does lowerkit, saying so."""
    plain = tmp_path / "plain.pte"
    assert lowerkit("lower", "zoo:ds_cnn", "-t", "vgf-fp", "-o", str(plain), "-q").code == 0
    outcome = lowerkit(
        "lower", "zoo:ds_cnn", "-t", "vgf-fp", "-o", str(out), "-q", "--system-config", "X", "--vela-config", "none.ini",
    )
    assert outcome.code == 0, outcome.err
    warnings = [line for line in outcome.err.splitlines() if line.startswith("warning:")]
    assert len(warnings) == 2 and all("'vgf-fp' ignores it" in w for w in warnings), outcome.err
    assert out.read_bytes() == plain.read_bytes()


def test_a_missing_model_converter_is_one_line_with_the_fix(lowerkit, out, monkeypatch):
    monkeypatch.setenv("MODEL_CONVERTER_PATH", str(out.parent / "no-such-converter"))
    outcome = lowerkit("lower", "zoo:ds_cnn", "-t", "vgf-int", "-o", str(out), "-q", "--no-cache")
    assert_one_line_error(outcome, 1, "MODEL_CONVERTER_PATH=", "is not an executable file", "ai-ml-sdk-model-converter")
    assert_nothing_written(out.parent)
