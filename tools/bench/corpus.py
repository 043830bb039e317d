"""The real-model corpus: the models ExecuTorch users lower, named as the CLI's model sources.

Names are model-source specs (see ``lowerkit lower MODEL``):

* ``tv:NAME``: a torchvision model by name, ``weights=None`` (random weights). The set is
  ExecuTorch's backend test suite's (``executorch/backends/test/suite/models/test_torchvision.py``,
  input ``(1, 3, 224, 224)``), plus ``tv:resnet18``;
* ``et:NAME``: ExecuTorch's example registry (``executorch.examples.models.MODEL_NAME_TO_MODEL``)
  as the CLI classifies it (``lowerkit.cli.sources.et``): untrained entries as they are, hub and
  random-weight demo entries with ``--random-weights`` (the same architecture, offline);
* ``hf:DIR``: a local Hugging Face ``save_pretrained`` folder. The corpus's are made from configs
  with random weights (seed 0) into a cache folder (`hf_root`), so ``hf:bert_tiny`` is the folder
  ``hf_root() / "bert_tiny"`` and loads exactly as a user's folder would.

Models are built by the CLI's own ``lowerkit.cli.model_source.load(spec, options)`` (seeded there),
so a corpus name means here what it means to ``lowerkit lower``; text models get 32 tokens
(``--sequence-length 32``). Calibration is the example inputs (aot_arm_compiler's default). The
suite's torchaudio models, and registry entries that cannot build offline, are listed with the
reason (`Case.unavailable`).
"""

from __future__ import annotations

import contextlib
import os
import shutil
import tempfile
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import torch

from bench.torchvision_shim import ensure_torchvision_importable

__all__ = ["CORPUS", "Case", "Model", "case", "hf_root", "load", "names", "source_spec"]

TORCHAUDIO_UNAVAILABLE = (
    "torchaudio cannot be installed here: its last release (2.11) needs torch 2.11, the lockfile pins torch 2.13"
)
#: ExecuTorch's backend test suite torchvision models (test_torchvision.py), in its order.
SUITE_TORCHVISION = (
    "alexnet", "convnext_small", "densenet161", "efficientnet_b4", "efficientnet_v2_s", "googlenet",
    "inception_v3", "maxvit_t", "mnasnet1_0", "mobilenet_v2", "mobilenet_v3_small", "regnet_y_1_6gf",
    "resnet50", "resnext50_32x4d", "shufflenet_v2_x1_0", "squeezenet1_1", "swin_v2_t", "vgg11",
    "vit_b_16", "wide_resnet50_2",
)  # fmt: skip
SUITE_TORCHAUDIO = ("conformer", "wav2letter", "wavernn")


@dataclass(frozen=True)
class Case:
    """One corpus entry: its model-source name, where it comes from, and why it cannot run (if so)."""

    name: str
    group: str
    unavailable: str | None = None
    note: str = ""
    #: Built with the CLI's ``--random-weights`` (an ``et:`` entry whose weights come from a hub).
    random_weights: bool = False


@dataclass(frozen=True)
class Model:
    """A built corpus model: eager module (eval), example inputs, calibration batches."""

    name: str
    module: torch.nn.Module
    example_inputs: tuple[Any, ...]
    calibration: list[tuple[Any, ...]] = field(default_factory=list)


# --- Hugging Face configs (random weights, saved with save_pretrained) -------------------------------------


def _hf_configs() -> dict[str, Callable[[], Any]]:
    from transformers import BertConfig, GPT2Config, LlamaConfig, TimmWrapperConfig, ViTConfig

    def llama(layers: int) -> Callable[[], Any]:
        return lambda: LlamaConfig(
            hidden_size=256, intermediate_size=768, num_hidden_layers=layers, num_attention_heads=4,
            num_key_value_heads=4, vocab_size=32000, max_position_embeddings=512, tie_word_embeddings=True,
            architectures=["LlamaForCausalLM"],
        )  # fmt: skip

    def vit_tiny() -> Any:
        config = ViTConfig(
            hidden_size=192, num_hidden_layers=12, num_attention_heads=3, intermediate_size=768,
            image_size=224, patch_size=16, architectures=["ViTForImageClassification"],
        )  # fmt: skip
        config.num_labels = 1000
        return config

    def timm(architecture: str, **model_args: Any) -> Callable[[], Any]:
        # As a timm/* hub folder holds it: transformers' wrapper around timm.create_model(architecture).
        def config() -> Any:
            made = TimmWrapperConfig(
                architecture=architecture, model_args=model_args or None,
                architectures=["TimmWrapperForImageClassification"],
            )  # fmt: skip
            made.num_labels = 1000
            return made

        return config

    return {
        "deit_tiny_timm": timm("deit_tiny_patch16_224"),
        "mobilevit_xxs_timm": timm("mobilevit_xxs"),
        "efficientnet_b0_timm": timm("efficientnet_b0"),
        "deit_2l_timm": timm("deit_tiny_patch16_224", depth=2),
        "bert_tiny": lambda: BertConfig(
            hidden_size=128, num_hidden_layers=2, num_attention_heads=2, intermediate_size=512,
            max_position_embeddings=512, architectures=["BertModel"],
        ),
        "vit_tiny": vit_tiny,
        "gpt2_2l": lambda: GPT2Config(
            n_embd=256, n_layer=2, n_head=4, n_positions=512, tie_word_embeddings=True,
            architectures=["GPT2LMHeadModel"],
        ),
        "llama_2l": llama(2),
        "llama_8l": llama(8),
        "llama_16l": llama(16),
    }


HF_NOTES = {
    "deit_tiny_timm": "timm deit_tiny_patch16_224 (qkv.unbind(0) + SDPA attention, 224²), a TimmWrapper folder",
    "mobilevit_xxs_timm": "timm mobilevit_xxs (convolutions and timm attention blocks, 256²), a TimmWrapper folder",
    "efficientnet_b0_timm": "timm efficientnet_b0 (224²), a TimmWrapper folder",
    "deit_2l_timm": "timm deit_tiny_patch16_224 with 2 blocks (model_args depth=2): the CI-sized DeiT",
    "bert_tiny": "BERT encoder, 2 layers, dim 128, seq 32",
    "vit_tiny": "ViT, DeiT-tiny-sized (12 layers, dim 192, 224², patch 16)",
    "gpt2_2l": "GPT-2, 2 layers, dim 256, tied embeddings, seq 32",
    "llama_2l": "Llama, 2 layers, dim 256, tied embeddings, vocab 32000, seq 32",
    "llama_8l": "Llama, 8 layers, dim 256, tied embeddings, vocab 32000, seq 32",
    "llama_16l": "Llama, 16 layers, dim 256, tied embeddings, vocab 32000, seq 32",
}
#: The corpus's Hugging Face image models (the others take tokens).
IMAGE_MODELS = ("vit_tiny", "deit_tiny_timm", "mobilevit_xxs_timm", "efficientnet_b0_timm", "deit_2l_timm")
#: Tokens per example input of the text models.
SEQUENCE_LENGTH = 32


def hf_root() -> Path:
    """The folder holding the corpus's Hugging Face folders (``$LOWERKIT_BENCH_HF``, else under ~/.cache)."""
    configured = os.environ.get("LOWERKIT_BENCH_HF")
    return Path(configured) if configured else Path.home() / ".cache" / "lowerkit-bench" / "hf"


def hf_folder(name: str) -> Path:
    """The ``save_pretrained`` folder of the corpus's HF model `name`, made once (seed 0)."""
    folder = hf_root() / name
    if (folder / "config.json").exists():
        return folder
    from transformers import (
        AutoConfig,
        AutoModel,
        AutoModelForCausalLM,
        AutoModelForImageClassification,
    )

    config = _hf_configs()[name]()
    architecture = config.architectures[0]
    auto = (
        AutoModelForCausalLM if architecture.endswith("CausalLM") or architecture.endswith("LMHeadModel")
        else AutoModelForImageClassification if architecture.endswith("ImageClassification")
        else AutoModel
    )  # fmt: skip
    if config.model_type != "timm_wrapper":  # its to_dict() keeps num_classes, which for_model() drops
        config = AutoConfig.for_model(**config.to_dict())
    with _seeded(0):
        model = auto.from_config(config)
    folder.parent.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(prefix=f".{name}-", dir=folder.parent))
    model.save_pretrained(staging)
    try:
        staging.rename(folder)
    except OSError:  # another process made it meanwhile
        shutil.rmtree(staging, ignore_errors=True)
    return folder


# --- The corpus ----------------------------------------------------------------------------------------------

def _et_cases() -> list[Case]:
    """The registry as the CLI classifies it: buildable offline (untrained, or random weights) or why not."""
    from lowerkit.cli.sources import et

    cases = []
    for entry in et.catalogue():
        missing = et.missing_packages(entry)
        if entry.kind == et.UNAVAILABLE or missing:
            reason = TORCHAUDIO_UNAVAILABLE if "torchaudio" in missing + list(entry.requires) else et.status(entry)
            cases.append(Case(f"et:{entry.name}", "executorch examples", reason))
        else:
            note = "random weights (--random-weights): " + entry.note if entry.kind != et.UNTRAINED else entry.note
            cases.append(Case(f"et:{entry.name}", "executorch examples", note=note, random_weights=entry.kind != et.UNTRAINED))
    return cases


CORPUS: tuple[Case, ...] = (
    *(Case(f"tv:{n}", "executorch suite: torchvision") for n in SUITE_TORCHVISION),
    Case("tv:resnet18", "torchvision"),
    *(Case(f"torchaudio:{n}", "executorch suite: torchaudio", TORCHAUDIO_UNAVAILABLE) for n in SUITE_TORCHAUDIO),
    *_et_cases(),
    *(Case(f"hf:{n}", "hugging face (config, random weights)", note=note) for n, note in HF_NOTES.items()),
)
_BY_NAME = {c.name: c for c in CORPUS}


def names(*, available: bool = True) -> list[str]:
    """The corpus's names (only those that can run here, unless `available` is False)."""
    return [c.name for c in CORPUS if not (available and c.unavailable)]


def case(name: str) -> Case:
    """The corpus entry called `name`; SystemExit naming the choices otherwise."""
    if name not in _BY_NAME:
        raise SystemExit(f"no corpus model {name!r}; choose from: {', '.join(names())}")
    return _BY_NAME[name]


def source_spec(name: str) -> str:
    """The model-source spec a user would type: ``hf:NAME`` becomes ``hf:<hf_root>/NAME``."""
    scheme, _, rest = name.partition(":")
    return f"hf:{hf_folder(rest)}" if scheme == "hf" else name


@contextlib.contextmanager
def _seeded(seed: int) -> Iterator[None]:
    with torch.random.fork_rng():
        torch.manual_seed(seed)
        yield


def load(name: str, *, image_size: int | None = None) -> Model:
    """Build corpus model `name` with the CLI's model sources: eval module, example inputs, calibration.

    `image_size` (``tv:`` / ``hf:`` image models) is the CLI's ``--image-size``.
    """
    from lowerkit.cli.model_source import load as load_source
    from lowerkit.cli.sources.options import SourceOptions

    entry = case(name)
    if entry.unavailable:
        raise SystemExit(f"{name} is unavailable here: {entry.unavailable}")
    ensure_torchvision_importable()
    spec = source_spec(name)
    text = name.startswith("hf:") and name.removeprefix("hf:") not in IMAGE_MODELS
    options = SourceOptions(
        random_weights=entry.random_weights, image_size=image_size,
        sequence_length=SEQUENCE_LENGTH if text else None,
    )  # fmt: skip
    source = load_source(spec, options)
    module = source.eager().eval()
    inputs = tuple(source.example_inputs)
    return Model(name, module, inputs, [inputs])
