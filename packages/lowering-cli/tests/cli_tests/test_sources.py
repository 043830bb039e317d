"""Model sources (issue 27): et:NAME, hf:DIR, tv:NAME, --weights, `lowerkit models`, source cache keys.

Hugging Face folders are written here with tiny configs and `save_pretrained`; nothing is
downloaded. Tests that import transformers' models or torchvision use the `importable_torchvision`
fixture (a documented test-harness workaround in conftest.py for this machine's torchvision).
"""

from __future__ import annotations

import importlib.abc
import json
import sys
import time
from pathlib import Path
from typing import Any

import pytest
import torch
from safetensors.torch import save_file

from cli_tests.test_startup import HEAVY, loaded, run_cli
from lowerkit.cli import model_source, targets
from lowerkit.cli.cache.key import source_key
from lowerkit.cli.errors import UsageError
from lowerkit.cli.options import LowerOptions
from lowerkit.cli.sources import et, tv
from lowerkit.cli.sources.options import SourceOptions

TOSA_FP = LowerOptions(targets.get("tosa-fp"))


def lower_json(lowerkit, *args):
    outcome = lowerkit("lower", *args, "--json", "-q")
    assert outcome.code == 0, outcome.err
    return json.loads(outcome.out)


def module_of(source: model_source.ModelSource) -> Any:
    """The source's eager module (every source here builds one)."""
    assert source.module is not None
    return source.module


def fails(lowerkit, *args) -> str:
    """Run a command that must fail as a user error: exit 2, one line, no traceback; its message."""
    outcome = lowerkit(*args)
    assert outcome.code == 2, (outcome.out, outcome.err)
    lines = outcome.err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("lowerkit: error: "), outcome.err
    return lines[0]


# --- et: ---------------------------------------------------------------------------------------


def test_every_registry_name_is_classified():
    from executorch.examples.models import MODEL_NAME_TO_MODEL

    assert sorted(MODEL_NAME_TO_MODEL) == sorted(et.BY_NAME), "classify new registry names in sources/et.py"


def test_models_lists_every_source_without_torch(tmp_path):
    out, modules = run_cli(tmp_path, "models", "--json")
    # The registry's name table is read from its package (an Enum and a dict, no torch).
    assert loaded(modules, HEAVY) == ["executorch", "executorch.examples", "executorch.examples.models"]
    rows = {row["model"]: row for row in json.loads(out)}
    assert rows["et:ds_cnn"]["buildable"] is True and rows["et:ds_cnn"]["weights"] == "untrained"
    assert rows["et:llama2"]["weights"] == "--random-weights"
    assert rows["et:efficient_sam"]["buildable"] is False
    assert rows["et:mv2"]["buildable"] is None, "torchvision's import is not tried without --check"
    assert "zoo:resnet8" in rows and "hf:DIR" in rows and "tv:NAME" in rows


def test_et_untrained_model_lowers_says_so_and_is_cached_by_name_and_weights(lowerkit, tmp_path):
    out = tmp_path / "m.pte"
    first = lower_json(lowerkit, "et:linear", "-t", "tosa-fp", "-o", str(out))
    assert first["cache"] == "miss"
    assert any("et:linear has untrained weights" in w for w in first["warnings"]), first["warnings"]
    second = lower_json(lowerkit, "et:linear", "-t", "tosa-fp", "-o", str(tmp_path / "again.pte"))
    assert second["cache"] == "hit" and set(second["seconds"]) == {"cache key", "cache lookup"}
    assert second["warnings"] == first["warnings"]
    assert (tmp_path / "again.pte").read_bytes() == out.read_bytes()

    weights = tmp_path / "linear.pt"
    torch.save({"linear.weight": torch.eye(3), "linear.bias": torch.zeros(3)}, weights)
    trained = lower_json(lowerkit, "et:linear", "-t", "tosa-fp", "-o", str(tmp_path / "w.pte"), "--weights", str(weights))
    assert trained["cache"] == "miss" and not any("untrained" in w for w in trained["warnings"])
    assert (tmp_path / "w.pte").read_bytes() != out.read_bytes()
    source = model_source.load("et:linear", SourceOptions(weights=weights))
    assert torch.equal(module_of(source).linear.weight, torch.eye(3))


def test_et_keys_change_with_every_input(tmp_path):
    weights = tmp_path / "w.pt"
    torch.save({"linear.weight": torch.eye(3), "linear.bias": torch.zeros(3)}, weights)
    base = source_key("et:linear", SourceOptions(), TOSA_FP)
    assert source_key("et:linear", SourceOptions(), TOSA_FP) == base
    keys = {
        base,
        source_key("et:add", SourceOptions(), TOSA_FP),
        source_key("et:linear", SourceOptions(), LowerOptions(targets.get("coreml"))),
        source_key("et:linear", SourceOptions(weights=weights), TOSA_FP),
        source_key("et:mv2", SourceOptions(random_weights=True), TOSA_FP),
        source_key("et:mv2", SourceOptions(), TOSA_FP),
    }
    torch.save({"linear.weight": 2 * torch.eye(3), "linear.bias": torch.zeros(3)}, weights)
    keys.add(source_key("et:linear", SourceOptions(weights=weights), TOSA_FP))
    assert len(keys) == 7


def test_et_models_that_would_download_or_cannot_build_fail_in_one_line(lowerkit, tmp_path):
    out = tmp_path / "m.pte"
    message = fails(lowerkit, "lower", "et:mv2", "-t", "tosa-fp", "-o", str(out))
    assert "would download its pretrained weights" in message and "--random-weights" in message
    assert "Did you mean 'mv2'" in fails(lowerkit, "lower", "et:mv22", "-t", "tosa-fp", "-o", str(out))
    assert "cannot be built here" in fails(lowerkit, "lower", "et:efficient_sam", "-t", "tosa-fp", "-o", str(out))
    assert "pass --random-weights" in fails(lowerkit, "lower", "et:llama2", "-t", "tosa-fp", "-o", str(out))
    assert "untrained already" in fails(lowerkit, "lower", "et:ds_cnn", "--random-weights", "-t", "tosa-fp", "-o", str(out))
    bad = tmp_path / "bad.pt"
    torch.save({"linear.weight": torch.eye(3), "extra": torch.zeros(1)}, bad)
    message = fails(lowerkit, "lower", "et:linear", "--weights", str(bad), "-t", "tosa-fp", "-o", str(out))
    assert "missing 1 key(s): linear.bias" in message and "unexpected 1 key(s): extra" in message
    assert not out.exists()


def test_et_nested_inputs_are_flattened():
    source = model_source.load("et:lstm")
    assert [tuple(t.shape) for t in source.example_inputs] == [(5, 3, 10), (2, 3, 20), (2, 3, 20)]
    output, (hidden, _) = module_of(source)(*source.example_inputs)
    assert output.shape == (5, 3, 20) and hidden.shape == (2, 3, 20)


# --- tv: ---------------------------------------------------------------------------------------


class _BrokenTorchvision(importlib.abc.MetaPathFinder):
    """Makes `import torchvision` fail as a wheel built for another torch does."""

    def find_spec(self, name, path=None, target=None):
        if name == "torchvision" or name.startswith("torchvision."):
            raise RuntimeError("operator torchvision::nms does not exist")
        return None


def test_a_torchvision_that_cannot_import_is_one_line_naming_the_cause(lowerkit, tmp_path, monkeypatch):
    for name in [n for n in sys.modules if n == "torchvision" or n.startswith("torchvision.")]:
        monkeypatch.delitem(sys.modules, name)
    monkeypatch.setattr(sys, "meta_path", [_BrokenTorchvision(), *sys.meta_path])
    message = fails(lowerkit, "lower", "tv:resnet18", "-t", "tosa-fp", "-o", str(tmp_path / "m.pte"))
    assert "torchvision cannot import here" in message and "torchvision::nms does not exist" in message
    assert f"built for another torch than this {torch.__version__}" in message
    assert "install the torchvision build matching your torch" in message
    assert tv.torchvision_failure(ValueError("another failure")) is None


def test_tv_builds_untrained_loads_weights_and_exports(importable_torchvision, tmp_path):
    source = model_source.load("tv:mobilenet_v3_small", SourceOptions(image_size=64))
    assert [tuple(t.shape) for t in source.example_inputs] == [(1, 3, 64, 64)]
    assert any("random (untrained) weights" in note for note in source.notes)
    assert source.export().module()(*source.example_inputs).shape == (1, 1000)
    weights = tmp_path / "mnv3.safetensors"
    state = {k: v.clone() for k, v in module_of(source).state_dict().items()}
    state["classifier.3.bias"] = torch.full_like(state["classifier.3.bias"], 0.5)
    save_file(state, str(weights))
    trained = model_source.load("tv:mobilenet_v3_small", SourceOptions(weights=weights))
    assert torch.equal(module_of(trained).classifier[3].bias, torch.full((1000,), 0.5)) and trained.notes == ()
    with pytest.raises(UsageError, match=r"do not fit tv:resnet18: missing .* unexpected"):
        model_source.load("tv:resnet18", SourceOptions(weights=weights))
    with pytest.raises(UsageError, match="Did you mean 'resnet18'"):
        model_source.load("tv:resnt18")


# --- hf: ---------------------------------------------------------------------------------------


@pytest.fixture
def hf_models(importable_torchvision, tmp_path) -> dict[str, Path]:
    """Tiny GPT-2 (tied head), BERT masked LM and ViT classifier folders written by save_pretrained."""
    from transformers import (
        BertConfig,
        BertForMaskedLM,
        GPT2Config,
        GPT2LMHeadModel,
        ViTConfig,
        ViTForImageClassification,
    )

    torch.manual_seed(0)
    folders = {name: tmp_path / name for name in ("gpt2", "bert", "vit")}
    GPT2LMHeadModel(GPT2Config(n_embd=32, n_layer=2, n_head=2, n_positions=32, vocab_size=100)).save_pretrained(folders["gpt2"])
    BertForMaskedLM(
        BertConfig(hidden_size=32, num_hidden_layers=2, num_attention_heads=2, intermediate_size=64, vocab_size=100, max_position_embeddings=24)
    ).save_pretrained(folders["bert"])
    vit = ViTConfig(hidden_size=32, num_hidden_layers=2, num_attention_heads=2, intermediate_size=64, image_size=32, patch_size=8)
    vit.num_labels = 10
    ViTForImageClassification(vit).save_pretrained(folders["vit"])
    return folders


def test_hf_causal_lm_keeps_tied_embeddings_lowers_and_hits(lowerkit, hf_models, tmp_path):
    source = model_source.load(f"hf:{hf_models['gpt2']}")
    model = module_of(source).model
    assert model.lm_head.weight is model.transformer.wte.weight
    assert [tuple(t.shape) for t in source.example_inputs] == [(1, 32)]
    assert source.notes == ()
    logits = source.export().module()(*source.example_inputs)
    assert isinstance(logits, torch.Tensor) and logits.shape == (1, 32, 100)
    from transformers import GPT2LMHeadModel

    reference = GPT2LMHeadModel.from_pretrained(hf_models["gpt2"]).eval()
    assert torch.allclose(logits, reference(source.example_inputs[0]).logits, atol=1e-5)

    out = tmp_path / "gpt2.pte"
    first = lower_json(lowerkit, f"hf:{hf_models['gpt2']}", "-t", "tosa-fp", "-o", str(out), "--sequence-length", "8")
    second = lower_json(lowerkit, f"hf:{hf_models['gpt2']}", "-t", "tosa-fp", "-o", str(tmp_path / "again.pte"), "--sequence-length", "8")
    assert [first["cache"], second["cache"]] == ["miss", "hit"]
    assert (tmp_path / "again.pte").read_bytes() == out.read_bytes()


def test_hf_masked_lm_and_image_classifier_take_their_inputs_from_the_config(lowerkit, hf_models, tmp_path):
    bert = model_source.load(f"hf:{hf_models['bert']}")
    assert [tuple(t.shape) for t in bert.example_inputs] == [(1, 24)]
    assert bert.export().module()(*bert.example_inputs).shape == (1, 24, 100)
    short = model_source.load(f"hf:{hf_models['bert']}", SourceOptions(sequence_length=6))
    assert [tuple(t.shape) for t in short.example_inputs] == [(1, 6)]
    encoder = model_source.load(f"hf:{hf_models['bert']}", SourceOptions(task="encoder"))
    assert module_of(encoder)(*encoder.example_inputs).shape == (1, 24, 32)
    vit = model_source.load(f"hf:{hf_models['vit']}")
    assert [tuple(t.shape) for t in vit.example_inputs] == [(1, 3, 32, 32)]
    out = tmp_path / "vit.pte"
    lowered = lower_json(lowerkit, f"hf:{hf_models['vit']}", "-t", "coreml", "-o", str(out))
    assert lowered["cache"] == "miss" and out.stat().st_size == lowered["pte_bytes"]


def test_hf_timm_folder_takes_its_input_size_from_pretrained_cfg(importable_torchvision, tmp_path):
    """A timm/* hub folder (transformers' TimmWrapper) has no image_size: the size comes from its
    pretrained_cfg, else timm's default for the architecture; --image-size overrides both."""
    from transformers import TimmWrapperConfig, TimmWrapperForImageClassification

    torch.manual_seed(0)
    config = TimmWrapperConfig(architecture="mobilevit_xxs", architectures=["TimmWrapperForImageClassification"])
    config.num_labels = 10
    TimmWrapperForImageClassification(config).save_pretrained(tmp_path / "default")
    config.pretrained_cfg = {"input_size": [3, 96, 128]}
    TimmWrapperForImageClassification(config).save_pretrained(tmp_path / "hub")
    default = model_source.load(f"hf:{tmp_path / 'default'}")
    assert [tuple(t.shape) for t in default.example_inputs] == [(1, 3, 256, 256)]  # timm's mobilevit_xxs
    hub = model_source.load(f"hf:{tmp_path / 'hub'}")
    assert [tuple(t.shape) for t in hub.example_inputs] == [(1, 3, 96, 128)]
    assert module_of(hub)(*hub.example_inputs).shape == (1, 10)
    small = model_source.load(f"hf:{tmp_path / 'hub'}", SourceOptions(image_size=64))
    assert [tuple(t.shape) for t in small.example_inputs] == [(1, 3, 64, 64)]


def test_hf_config_without_weights_builds_random_weights_with_a_warning(hf_models):
    (hf_models["bert"] / "model.safetensors").unlink()
    source = model_source.load(f"hf:{hf_models['bert']}")
    assert any("holds no *.safetensors weights: built random (untrained) weights" in note for note in source.notes)


def test_hf_keys_change_with_config_weights_task_and_inputs(hf_models, tmp_path):
    folder = hf_models["bert"]
    spec = f"hf:{folder}"
    base = source_key(spec, SourceOptions(), TOSA_FP)
    assert source_key(spec, SourceOptions(), TOSA_FP) == base
    keys = {
        base,
        source_key(spec, SourceOptions(task="encoder"), TOSA_FP),
        source_key(spec, SourceOptions(sequence_length=8), TOSA_FP),
        source_key(f"hf:{hf_models['gpt2']}", SourceOptions(), TOSA_FP),
    }
    weights = folder / "model.safetensors"
    data = bytearray(weights.read_bytes())
    data[-1] ^= 1
    time.sleep(0.01)  # a new modification time: the in-process digest memo is keyed by it
    weights.write_bytes(bytes(data))
    keys.add(source_key(spec, SourceOptions(), TOSA_FP))
    config = json.loads((folder / "config.json").read_text())
    config["layer_norm_eps"] = 1e-6
    (folder / "config.json").write_text(json.dumps(config))
    keys.add(source_key(spec, SourceOptions(), TOSA_FP))
    assert len(keys) == 6


def test_hf_bad_folders_fail_in_one_line_and_write_nothing(lowerkit, hf_models, tmp_path):
    out = tmp_path / "m.pte"

    def lower_fails(folder: Path, *extra: str) -> str:
        return fails(lowerkit, "lower", f"hf:{folder}", "-t", "tosa-fp", "-o", str(out), *extra)

    empty = tmp_path / "empty"
    empty.mkdir()
    assert "has no config.json" in lower_fails(empty)
    assert "has no masked-lm model for architecture 'vit'" in lower_fails(hf_models["vit"], "--task", "masked-lm")
    message = lower_fails(hf_models["gpt2"], "--weights", str(hf_models["bert"] / "model.safetensors"))
    assert "do not fit" in message and "missing" in message and "unexpected" in message
    config = json.loads((hf_models["gpt2"] / "config.json").read_text())
    (hf_models["gpt2"] / "config.json").write_text(json.dumps({**config, "architectures": None}))
    assert "names no architectures; pass --task" in lower_fails(hf_models["gpt2"])
    (hf_models["gpt2"] / "config.json").write_text(json.dumps({**config, "model_type": "no_such_architecture"}))
    assert "cannot read config.json" in lower_fails(hf_models["gpt2"])
    weights = hf_models["bert"] / "model.safetensors"
    weights.write_bytes(weights.read_bytes()[: weights.stat().st_size // 2])
    assert "is not a readable safetensors file" in lower_fails(hf_models["bert"])
    assert not out.exists()


# --- .pt2, fleet files ---------------------------------------------------------------------------


def test_a_pt2_hit_imports_no_torch_and_another_file_is_a_miss(lowerkit, tmp_path):
    source = model_source.load("et:linear")
    program = tmp_path / "linear.pt2"
    torch.export.save(source.export(), str(program))
    out = tmp_path / "m.pte"
    assert lower_json(lowerkit, str(program), "-t", "tosa-fp", "-o", str(out))["cache"] == "miss"
    stdout, modules = run_cli(tmp_path, "lower", str(program), "-t", "tosa-fp", "-o", str(tmp_path / "hit.pte"), "--json", "-q")
    assert json.loads(stdout)["cache"] == "hit"
    assert loaded(modules, HEAVY) == [], "a .pt2 cache hit must not import torch"
    assert (tmp_path / "hit.pte").read_bytes() == out.read_bytes()
    before = source_key(str(program), SourceOptions(), TOSA_FP)
    with torch.no_grad():
        module_of(source).linear.weight.add_(1.0)
    torch.export.save(source.export(), str(program))
    assert source_key(str(program), SourceOptions(), TOSA_FP) != before
    assert "do not apply" in fails(lowerkit, "lower", str(program), "--task", "encoder", "-t", "tosa-fp", "-o", str(out))


def test_fleet_files_take_source_options(tmp_path):
    from lowerkit.cli.fleet import spec

    torch.save({"linear.weight": torch.eye(3), "linear.bias": torch.zeros(3)}, tmp_path / "w.pt")
    fleet = tmp_path / "FLEET.toml"
    fleet.write_text(
        '[[lower]]\nmodel = "et:linear"\ntargets = ["tosa-fp"]\nweights = "w.pt"\n'
        '[[lower]]\nmodel = "hf:models/bert"\ntargets = ["coreml"]\ntask = "encoder"\nsequence_length = 16\n'
    )
    jobs = spec.load(fleet)
    assert jobs[0].source == SourceOptions(weights=tmp_path / "w.pt")
    assert jobs[1].source == SourceOptions(task="encoder", sequence_length=16)
    assert [job.output_name for job in jobs] == ["et_linear.tosa-fp.pte", "hf_models_bert.coreml.pte"]
    fleet.write_text('[[lower]]\nmodel = "hf:x"\ntargets = ["coreml"]\ntask = "translation"\n')
    with pytest.raises(UsageError, match=r"FLEET.toml:4: unknown task 'translation'"):
        spec.load(fleet)


def test_debug_takes_the_source_options(lowerkit, tmp_path):
    from lowerkit.cli.sources.flags import as_arguments

    message = fails(lowerkit, "debug", "et:mv2", "-t", "tosa-int")
    assert "would download its pretrained weights" in message
    assert "has no config.json" in fails(lowerkit, "debug", f"hf:{tmp_path}", "-t", "tosa-int", "--task", "encoder")
    built = SourceOptions(weights=Path("w.safetensors"), task="encoder", sequence_length=16)
    assert as_arguments(built) == ["--weights", "w.safetensors", "--task", "encoder", "--sequence-length", "16"]
