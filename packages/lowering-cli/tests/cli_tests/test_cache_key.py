"""The lowering cache key: every input that decides the bytes changes it; nothing else does."""

from __future__ import annotations

import dataclasses
import hashlib
import importlib.metadata
import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import torch

from lowerkit.arm_passes import converter
from lowerkit.cli import calibration, model_source, targets
from lowerkit.cli.backends.arm.cache_key import converter_fingerprint
from lowerkit.cli.backends.arm.options import ArmSettings
from lowerkit.cli.backends.coreml.options import CoreMLSettings
from lowerkit.cli.cache import key as cache_key
from lowerkit.cli.cache.digests import Digest
from lowerkit.cli.model_source import ModelSource
from lowerkit.cli.options import LowerOptions

BASE = LowerOptions(targets.get("tosa-int"))


def variants(tmp_path: Path) -> dict[str, Any]:
    """One value per LowerOptions field that differs from BASE's (a new field must be added here);
    `settings` is checked field by field (`settings_variants`)."""
    calib = tmp_path / "calib.pt"
    torch.save(torch.zeros(1, 1, 49, 10), calib)
    return {
        "target": targets.get("ethos-u55-128"),
        "calibration_path": calib,
        "verify": True,
        "keep_float": ("block1",),
        "settings": ArmSettings(a16w8=True),
    }


def settings_variants(tmp_path: Path) -> dict[type, dict[str, Any]]:
    """One value per field of each backend's settings that differs from its default (a new field must be added here)."""
    return {
        ArmSettings: {
            "system_config": "Ethos_U55_High_End_Embedded",
            "memory_mode": "Shared_Sram",
            "vela_config": _file(tmp_path / "vela.ini", b"[System_Config.Mine]\ncore_clock=500e6\n"),
            "a16w8": True,
            "bundle_path": tmp_path / "m.bpte",
            "etrecord_path": tmp_path / "m.etrecord",
            "sram_budget": 512 * 1024,
            "flash_budget": 2 * 1024 * 1024,
        },
        CoreMLSettings: {
            "pass_names": ("common::dead_code_elimination",),
            "recipe": _file(tmp_path / "recipe.toml", b'[global]\nmode = "palettize"\nnbits = 4\n'),
            "shapes": (("x", ((1, 1, 49, 10), (1, 1, 98, 10))),),
        },
    }


def _file(path: Path, data: bytes) -> Path:
    path.write_bytes(data)
    return path


def key(source: ModelSource, options: LowerOptions = BASE, batches: list | None = None) -> str:
    if batches is None:
        batches = calibration.load(options.calibration_path, source, warn=[]) if options.target.calibrates else []
    return cache_key.lowering_key(source, options, batches)


@pytest.fixture(scope="module")
def ds_cnn() -> ModelSource:
    return model_source.load("zoo:ds_cnn")


def test_every_option_field_is_in_the_key(ds_cnn, tmp_path):
    changed = variants(tmp_path)
    fields = {f.name for f in dataclasses.fields(LowerOptions)}
    assert set(changed) == fields, f"add a variant for the new LowerOptions fields {sorted(fields - set(changed))}"
    base = key(ds_cnn)
    for name, value in changed.items():
        options = dataclasses.replace(BASE, **{name: value})
        assert getattr(options, name) != getattr(BASE, name)
        assert key(ds_cnn, options, batches=[]) != key(ds_cnn, BASE, batches=[]), f"field {name} is not in the key"
        assert cache_key.zoo_key("ds_cnn", options) != cache_key.zoo_key("ds_cnn", BASE), f"field {name} is not in the zoo key"
    assert key(ds_cnn) == base, "the key is not stable within a process"


def test_every_settings_field_of_every_backend_is_in_the_key(ds_cnn, tmp_path):
    changed = settings_variants(tmp_path)
    assert set(changed) == {backend.settings_type for backend in targets.BACKENDS.values()}
    for settings_type, values in changed.items():
        fields = {f.name for f in dataclasses.fields(settings_type)}
        assert set(values) == fields, f"add a variant for the new {settings_type.__name__} fields {sorted(fields - set(values))}"
        target = next(t for t in targets.TARGETS.values() if targets.backend_of(t).settings_type is settings_type)
        plain = LowerOptions(target)
        for name, value in values.items():
            options = LowerOptions(target, settings=settings_type(**{name: value}))
            assert key(ds_cnn, options, batches=[]) != key(ds_cnn, plain, batches=[]), f"field {name} is not in the key"
            assert cache_key.zoo_key("ds_cnn", options) != cache_key.zoo_key("ds_cnn", plain), f"field {name} is not in the zoo key"


def test_an_output_location_counts_by_presence_not_by_path_or_old_content(ds_cnn, tmp_path):
    old = tmp_path / "old.bpte"
    old.write_bytes(b"an earlier bundle")
    here = dataclasses.replace(BASE, settings=ArmSettings(bundle_path=tmp_path / "new.bpte"))
    there = dataclasses.replace(BASE, settings=ArmSettings(bundle_path=old))
    assert key(ds_cnn, here, batches=[]) == key(ds_cnn, there, batches=[])
    assert key(ds_cnn, here, batches=[]) != key(ds_cnn, BASE, batches=[])


def test_the_zoo_key_names_the_model_and_the_machine_kind(monkeypatch):
    first = cache_key.zoo_key("ds_cnn", BASE)
    assert cache_key.zoo_key("ds_cnn", BASE) == first
    assert cache_key.zoo_key("resnet8", BASE) != first
    monkeypatch.setenv("ATEN_CPU_CAPABILITY", "default" if os.environ.get("ATEN_CPU_CAPABILITY") != "default" else "avx2")
    cache_key._toolchain_fingerprint.cache_clear()
    try:
        assert cache_key.zoo_key("ds_cnn", BASE) != first, "calibration rounds per CPU kernel kind: it must be in the key"
    finally:
        monkeypatch.undo()
        cache_key._toolchain_fingerprint.cache_clear()


def test_an_option_value_the_key_cannot_encode_fails_loudly():
    @dataclasses.dataclass(frozen=True)
    class Future(LowerOptions):
        future_setting: object = dataclasses.field(default_factory=object)

    with pytest.raises(TypeError, match="cannot encode a object"):
        cache_key.options_fingerprint(Future(targets.get("coreml")))


def test_a_calibration_file_is_keyed_by_content(ds_cnn, tmp_path):
    calib = tmp_path / "calib.pt"
    torch.save(torch.zeros(1, 1, 49, 10), calib)
    options = dataclasses.replace(BASE, calibration_path=calib)
    first = key(ds_cnn, options, batches=[])
    torch.save(torch.ones(1, 1, 49, 10), calib)
    assert key(ds_cnn, options, batches=[]) != first


def test_one_calibration_sample_changes_the_key(ds_cnn):
    batches = calibration.load(None, ds_cnn, warn=[])
    first = key(ds_cnn, batches=batches)
    batches[3] = (batches[3][0].clone(),)
    assert key(ds_cnn, batches=batches) == first, "equal values must give the same key"
    batches[3][0].view(-1)[17] += 1e-3
    assert key(ds_cnn, batches=batches) != first


def test_one_weight_changes_the_key_of_a_zoo_model(ds_cnn):
    source = model_source.load("zoo:ds_cnn")
    first = key(source)
    assert first == key(ds_cnn), "two loads of one zoo model must share a key"
    assert source.module is not None
    with torch.no_grad():
        next(source.module.parameters()).view(-1)[0] += 1e-4
    assert key(source) != first


def test_one_weight_changes_the_key_of_an_exported_program(ds_cnn):
    module = model_source.load("zoo:ds_cnn").module
    program = torch.export.export(module, ds_cnn.example_inputs)
    exported = ModelSource(name="m", example_inputs=ds_cnn.example_inputs, exported=program)
    first = key(exported)
    name = next(iter(program.state_dict))
    with torch.no_grad():
        program.state_dict[name].view(-1)[0] += 1e-4
    assert key(exported) != first


def test_the_graph_changes_the_key_of_a_module_without_zoo_code(ds_cnn):
    """A factory's module is exported: same weights, another graph -> another key."""
    module = model_source.load("zoo:ds_cnn").module
    assert module is not None
    net: torch.nn.Module = module
    plain = ModelSource(name="m", example_inputs=ds_cnn.example_inputs, module=net)
    first = key(plain)

    class Doubled(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.inner = net

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            return self.inner(x) * 2

    doubled = ModelSource(name="m", example_inputs=ds_cnn.example_inputs, module=Doubled())
    assert key(doubled) != first


def test_a_tool_version_changes_the_key(ds_cnn, monkeypatch):
    first = key(ds_cnn)
    real = importlib.metadata.version

    def version(name: str) -> str:
        return "9.9.9" if name == "tosa-tools" else real(name)

    monkeypatch.setattr(importlib.metadata, "version", version)
    zoo_first = cache_key.zoo_key("ds_cnn", BASE)
    cache_key._toolchain_fingerprint.cache_clear()
    try:
        assert key(ds_cnn) != first
        assert cache_key.zoo_key("ds_cnn", BASE) != zoo_first
    finally:
        monkeypatch.undo()
        cache_key._toolchain_fingerprint.cache_clear()
    assert key(ds_cnn) == first


def test_the_toolchain_fingerprint_names_every_tool_and_lowerkit_package():
    text = cache_key.toolchain_fingerprint()
    for name in ("torch", "executorch", "coremltools", "torchao", "tosa-tools", "ethos-u-vela"):
        assert f"\n{name}=" in text
    for package in ("pass_infra", "arm_passes", "coreml_quantizer", "coreml_compiler_ops", "coreml_preprocess", "cli", "zoo"):
        line = next(line for line in text.splitlines() if line.startswith(f"lowerkit.{package} source="))
        assert line != f"lowerkit.{package} source=" + Digest().hexdigest(), f"no source found for {package}"


_KEYS = """
import json, sys, torch
from lowerkit.cli import calibration, model_source, targets
from lowerkit.cli.cache.key import lowering_key
from lowerkit.cli.model_source import ModelSource
from lowerkit.cli.options import LowerOptions
source = model_source.load("zoo:ds_cnn")
options = LowerOptions(targets.get("tosa-int"))
batches = calibration.load(None, source, warn=[])
program = torch.export.export(source.module, source.example_inputs)
exported = ModelSource(name="m", example_inputs=source.example_inputs, exported=program)
from lowerkit.cli.cache.key import toolchain_fingerprint, zoo_key
keys = [lowering_key(source, options, batches), lowering_key(exported, options, batches), zoo_key("ds_cnn", options)]
print(json.dumps({"toolchain": toolchain_fingerprint(), "keys": keys}))
"""


def test_keys_are_the_same_in_another_process(ds_cnn):
    options = LowerOptions(targets.get("tosa-int"))
    batches = calibration.load(None, ds_cnn, warn=[])
    program = torch.export.export(model_source.load("zoo:ds_cnn").module, ds_cnn.example_inputs)
    exported = ModelSource(name="m", example_inputs=ds_cnn.example_inputs, exported=program)
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(p for p in sys.path if p)}
    done = subprocess.run([sys.executable, "-c", _KEYS], env=env, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]
    child = json.loads(done.stdout)
    assert child["toolchain"].splitlines() == cache_key.toolchain_fingerprint().splitlines()
    assert child["keys"] == [
        cache_key.lowering_key(ds_cnn, options, batches),
        cache_key.lowering_key(exported, options, batches),
        cache_key.zoo_key("ds_cnn", options),
    ]


def _converter(path: Path, content: bytes) -> Path:
    path.write_bytes(content)
    path.chmod(0o755)
    return path


def test_a_users_model_converter_is_keyed_by_content_for_vgf_targets(ds_cnn, tmp_path, monkeypatch):
    vgf = dataclasses.replace(BASE, target=targets.get("vgf-int"))
    monkeypatch.delenv(converter.ENV, raising=False)
    packaged = cache_key.zoo_key("ds_cnn", vgf), key(ds_cnn, vgf, batches=[])
    binary = _converter(tmp_path / "model-converter", b"#!/bin/sh\necho one\n")
    monkeypatch.setenv(converter.ENV, str(binary))
    first = cache_key.zoo_key("ds_cnn", vgf), key(ds_cnn, vgf, batches=[])
    assert first[0] != packaged[0] and first[1] != packaged[1], "a user's converter must not hit the packaged one's entries"
    _converter(binary, b"#!/bin/sh\necho two\n")
    second = cache_key.zoo_key("ds_cnn", vgf), key(ds_cnn, vgf, batches=[])
    assert second[0] != first[0] and second[1] != first[1], "a rebuilt converter must not hit the old one's entries"
    moved = _converter(tmp_path / "elsewhere", b"#!/bin/sh\necho two\n")
    monkeypatch.setenv(converter.ENV, str(moved))
    assert cache_key.zoo_key("ds_cnn", vgf) == second[0], "the same converter bytes at another path are the same lowering"


def test_the_model_converter_is_not_in_the_key_of_other_targets(ds_cnn, tmp_path, monkeypatch):
    monkeypatch.delenv(converter.ENV, raising=False)
    before = cache_key.zoo_key("ds_cnn", BASE), key(ds_cnn, BASE, batches=[])
    monkeypatch.setenv(converter.ENV, str(_converter(tmp_path / "model-converter", b"#!/bin/sh\n")))
    assert (cache_key.zoo_key("ds_cnn", BASE), key(ds_cnn, BASE, batches=[])) == before


def test_the_converter_text_in_the_key_is_pinned(tmp_path, monkeypatch):
    """What a VGF key says of the model converter, to the letter: a change would miss every cached
    VGF lowering. The user's binary by content, the packaged one by name, one on PATH by content."""
    for folder in ("mine", "bin"):
        (tmp_path / folder).mkdir()
    user = _converter(tmp_path / "mine" / "model-converter", b"#!/bin/sh\necho mine\n")
    monkeypatch.setenv("MODEL_CONVERTER_PATH", str(user))
    assert converter_fingerprint() == "MODEL_CONVERTER_PATH:" + hashlib.sha256(b"#!/bin/sh\necho mine\n").hexdigest()
    monkeypatch.delenv("MODEL_CONVERTER_PATH")
    binaries = tmp_path / "site" / "model_converter" / "binaries" / "bin"
    binaries.mkdir(parents=True)
    (tmp_path / "site" / "model_converter" / "__init__.py").write_text("")
    packaged = _converter(binaries / "model-converter", b"#!/bin/sh\necho packaged\n")
    monkeypatch.delitem(sys.modules, "model_converter", raising=False)
    monkeypatch.syspath_prepend(str(tmp_path / "site"))
    assert converter_fingerprint() == "packaged"
    packaged.chmod(0o644)
    on_path = _converter(tmp_path / "bin" / "model-converter", b"#!/bin/sh\necho path\n")
    monkeypatch.setenv("PATH", str(on_path.parent))
    assert converter_fingerprint() == "PATH:" + hashlib.sha256(b"#!/bin/sh\necho path\n").hexdigest()
    on_path.unlink()
    assert converter_fingerprint() == "none"
