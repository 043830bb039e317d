"""The backend seam: each target has one backend, which decides its options, its debug and its result line."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from cli_tests.test_errors import assert_nothing_written, assert_one_line_error
from lowerkit.cli import targets
from lowerkit.cli.backend import TargetOption
from lowerkit.cli.backends.arm.backend import ARM
from lowerkit.cli.backends.arm.options import ArmSettings
from lowerkit.cli.backends.arm.targets import ARM_TARGET_NAMES
from lowerkit.cli.backends.coreml.backend import COREML
from lowerkit.cli.backends.coreml.targets import COREML_RECIPES
from lowerkit.cli.cache import key as cache_key
from lowerkit.cli.errors import UsageError
from lowerkit.cli.options import LowerOptions

#: A value each option accepts on the command line (the CLI refuses it before any work where it does not apply).
VALUES: dict[str, tuple[str, ...]] = {
    "--system-config": ("--system-config", "X"),
    "--memory-mode": ("--memory-mode", "X"),
    "--vela-config": ("--vela-config", "vela.ini"),
    "--sram-budget": ("--sram-budget", "1MiB"),
    "--flash-budget": ("--flash-budget", "1MiB"),
    "--a16w8": ("--a16w8",),
    "--bundle": ("--bundle", "m.bpte"),
    "--etrecord": ("--etrecord", "m.etrecord"),
    "--tosa-dir": ("--tosa-dir", "tosa"),
    "--mlpackage": ("--mlpackage", "m.mlpackage"),
    "--coreml-passes": ("--coreml-passes", "common::dead_code_elimination"),
    "--recipe": ("--recipe", "recipe.toml"),
    "--shapes": ("--shapes", "x=1x3x16x16"),
}


def test_every_target_is_declared_by_exactly_one_backend() -> None:
    declared = [target for backend in targets.BACKENDS.values() for target in backend.targets]
    assert len(declared) == len({t.name for t in declared}) == len(targets.TARGETS)
    for name, target in targets.TARGETS.items():
        owners = [b for b in targets.BACKENDS.values() if target in b.targets]
        assert owners == [targets.backend_of(target)], name
        assert targets.backend_of(target).family == target.backend
    assert set(ARM_TARGET_NAMES) == {t.name for t in ARM.targets}
    assert set(COREML_RECIPES) == {t.name for t in COREML.targets}


def test_every_option_is_declared_once_with_the_refusal_users_see() -> None:
    flags = [option.flag for backend in targets.BACKENDS.values() for option in backend.options]
    assert len(flags) == len(set(flags)) == len(targets.OPTIONS)
    lower_flags = {flag for flag, option in targets.OPTIONS.items() if option.command == "lower"}
    assert set(VALUES) == lower_flags, f"give the new flags a value in VALUES: {sorted(lower_flags - set(VALUES))}"
    with pytest.raises(ValueError, match="no backend declares"):
        targets.check_applicable(targets.get("coreml"), {"--no-such-option": 1}, warn=[])


def _refusing(option: TargetOption) -> list[str]:
    """One target of each backend that neither takes nor ignores `option`."""
    picked = []
    for backend in targets.BACKENDS.values():
        names = [t.name for t in backend.targets if not option.takes(t) and option.ignored(t) is None]
        picked += names[:1]
    return picked


@pytest.mark.parametrize(
    ("flag", "target"),
    [(flag, name) for flag in VALUES for name in _refusing(targets.option(flag))],
)
def test_a_refused_option_is_the_backends_one_line(lowerkit, tmp_path: Path, flag: str, target: str) -> None:
    out = tmp_path / "out" / "model.pte"
    out.parent.mkdir()
    outcome = lowerkit("lower", "zoo:ds_cnn", "-t", target, "-o", str(out), *VALUES[flag])
    assert_one_line_error(outcome, 2, targets.option(flag).refusal(targets.get(target)))
    assert_nothing_written(out.parent)


def test_options_a_target_takes_are_checked_by_its_backend(tmp_path: Path) -> None:
    ethos_u = targets.get("ethos-u55-128")
    settings = targets.check_options(ethos_u, {"--sram-budget": "512KiB", "--a16w8": True}, warn=[])
    assert settings == ArmSettings(sram_budget=512 * 1024, a16w8=True)
    with pytest.raises(UsageError, match="name it"):
        targets.check_options(ethos_u, {"--bundle": tmp_path / "m.pte"}, warn=[])
    # Nothing given: LowerOptions' default (one cache key), whatever the backend.
    for target in targets.TARGETS.values():
        assert LowerOptions(target, settings=targets.check_options(target, {}, warn=[])) == LowerOptions(target)


def test_vgf_ignores_the_vela_settings_with_a_warning() -> None:
    warnings: list[str] = []
    settings = targets.check_options(targets.get("vgf-int"), {"--system-config": "X", "--memory-mode": "Y"}, warn=warnings)
    assert settings is None
    assert len(warnings) == 2 and all("'vgf-int' ignores it" in w for w in warnings)


def test_keep_float_names_every_quantizing_target(lowerkit, tmp_path: Path) -> None:
    """tosa-int16 calibrates, so the list of quantizing targets names it (it once did not)."""
    outcome = lowerkit("lower", "zoo:ds_cnn", "-t", "tosa-fp", "-o", str(tmp_path / "m.pte"), "--keep-float", "x")
    assert_one_line_error(outcome, 2, "--keep-float applies to quantizing targets", "tosa-int16", "ethos-u*", "coreml-int8")


def test_debug_takes_what_the_backends_can_debug(lowerkit) -> None:
    assert all(ARM.debuggable(t) for t in ARM.targets)
    palettized = [t for t in COREML.targets if t.name.startswith("coreml-palettize")]
    assert len(palettized) > 1 and all(COREML.debuggable(t) for t in palettized)
    assert not COREML.debuggable(targets.get("coreml")) and not COREML.debuggable(targets.get("coreml-fp32"))
    outcome = lowerkit("debug", "zoo:ds_cnn", "-t", "coreml-fp32")
    assert_one_line_error(outcome, 2, "coreml-int8", "coreml-palettize*", "any Arm target", "not 'coreml-fp32'")
    outcome = lowerkit("debug", "zoo:ds_cnn", "-t", "coreml-int8", "--bisect")
    assert_one_line_error(outcome, 2, "--bisect bisects the Arm pass pipeline; 'coreml-int8' is not an Arm target")


@pytest.mark.parametrize(
    ("target", "check", "line"),
    [
        ("tosa-int", {"sqnr_db": 31.25, "max_error_quanta": 2.0}, "SQNR 31.2 dB, max error 2 quanta"),
        ("tosa-fp", {"sqnr_db": None}, "no quantization to check"),
        ("coreml-int8", {"output_sqnr_db": 40.0, "weight_sqnr_db": 50.0}, "output SQNR 40.0 dB"),
        ("coreml-w8", {"weight_sqnr_db": 50.0, "decoded_weights": 3}, "weight SQNR 50.0 dB"),
        ("coreml", {"note": "..."}, "no quantization to check"),
    ],
)
def test_the_short_result_line_is_the_backends(target: str, check: dict[str, Any], line: str) -> None:
    assert targets.backend_of(targets.get(target)).short_verification(check) == line


def test_the_cache_keys_option_text_is_unchanged() -> None:
    """The seam moved `Target`; its fields, and so every cache key, stay as they were."""
    text = cache_key.options_fingerprint(LowerOptions(targets.get("vgf-int")))
    assert text.splitlines()[0] == (
        "target=Target(name=str:'vgf-int',backend=str:'arm',summary=str:\"VGF (TOSA-1.0+INT, int8 quantized, "
        "converted by Arm's ML SDK model converter)\",calibrates=bool:True)"
    )
    # The model converter is keyed for the VGF targets, as before.
    assert [t.name for t in targets.TARGETS.values() if targets.backend_of(t).cache_key_extras(t)] == [
        "vgf-int", "vgf-fp",
    ]
