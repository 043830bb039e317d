"""`et:NAME`: ExecuTorch's example registry (`executorch.examples.models.MODEL_NAME_TO_MODEL`).

The names are the ones aot_arm_compiler's `--model_name` takes. Each is classified here (read
from executorch/examples/models/*) by where its weights come from, because lowerkit never
downloads: `untrained` entries are built by the registry itself with no weights to fetch (the
toy models, the MLPerf Tiny models, LSTM, mv2_untrained); `random` ones are the registry's
random-weight demo models (llama2), built only with `--random-weights`; `hub` ones load
pretrained weights from a hub, so lowerkit builds the same architecture offline instead, with
`--random-weights` or `--weights FILE`; `unavailable` ones need packages or checkpoints that
cannot be had offline. The listing (`catalogue`, `status`) imports no torch.
"""

from __future__ import annotations

import importlib.util
import os
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from lowerkit.cli.errors import UsageError
from lowerkit.cli.sources.options import DEFAULT, SourceOptions
from lowerkit.pass_infra.helpers.suggest import did_you_mean

if TYPE_CHECKING:
    import torch

    from lowerkit.cli.sources.model import ModelSource

UNTRAINED, RANDOM, HUB, UNAVAILABLE = "untrained", "random", "hub", "unavailable"

#: The seed of every weight and input lowerkit draws for an `et:` model.
SEED = 0

#: BERT-uncased ids of "Hello, my dog is cute", the sentence the registry tokenizes for mobilebert.
MOBILEBERT_IDS = (101, 7592, 1010, 2026, 3899, 2003, 10140, 102)


@dataclass(frozen=True)
class EtModel:
    """One registry entry as lowerkit builds it."""

    name: str
    kind: str
    #: Where its weights come from, or why it cannot build here.
    note: str
    #: Packages the build imports (beyond torch and ExecuTorch).
    requires: tuple[str, ...] = ()
    #: How lowerkit builds a `hub` entry's architecture offline: "torchvision:FN", "timm:NAME", "mobilebert".
    architecture: str | None = None
    #: The registry's example input shape for an offline-built `hub` entry.
    input_shape: tuple[int, ...] = (1, 3, 224, 224)


def _untrained(name: str, note: str = "no pretrained weights; the registry's own initialization", requires: tuple[str, ...] = ()) -> EtModel:
    return EtModel(name, UNTRAINED, note, requires)


def _hub(name: str, weights: str, architecture: str, *, shape: tuple[int, ...] = (1, 3, 224, 224)) -> EtModel:
    package = architecture.partition(":")[0] if ":" in architecture else "transformers"
    return EtModel(name, HUB, weights, (package,), architecture, shape)


def _unavailable(name: str, why: str, requires: tuple[str, ...] = ()) -> EtModel:
    return EtModel(name, UNAVAILABLE, why, requires)


_CHECKPOINT = (
    "needs a converted LLM checkpoint and params file (see ExecuTorch's examples/models/{}); not buildable by name: "
    "lower its Hugging Face folder with hf:DIR --task text-generation"
)
ENTRIES: tuple[EtModel, ...] = (
    *(_untrained(n, "a toy module (no weights or seeded initialization)") for n in ("mul", "linear", "add", "add_mul", "softmax", "conv1d", "sdpa")),
    _untrained("lstm"),
    *(_untrained(n, "MLPerf Tiny architecture; the registry ships no weights") for n in ("deep_autoencoder", "ds_cnn", "mobilenet_v1_025", "resnet8")),
    _untrained("mv2_untrained", "the registry's untrained MobileNetV2", ("torchvision",)),
    EtModel("llama2", RANDOM, "the registry's random-weight demo Llama (206M parameters) when no checkpoint is given"),
    EtModel("llama", RANDOM, "the registry's random-weight demo Llama (206M parameters) when no checkpoint is given"),
    _hub("mv2", "torchvision MobileNet_V2_Weights.DEFAULT", "torchvision:mobilenet_v2"),
    _hub("mv3", "torchvision MobileNet_V3_Small_Weights.IMAGENET1K_V1", "torchvision:mobilenet_v3_small"),
    _hub("vit", "torchvision ViT_B_16 IMAGENET1K_V1", "torchvision:vit_b_16"),
    _hub("ic3", "torchvision Inception_V3 IMAGENET1K_V1", "torchvision:inception_v3", shape=(1, 3, 299, 299)),
    _hub("resnet18", "torchvision ResNet18_Weights.IMAGENET1K_V1", "torchvision:resnet18"),
    _hub("resnet50", "torchvision ResNet50_Weights.IMAGENET1K_V1", "torchvision:resnet50"),
    _hub("dl3", "torchvision DeepLabV3_ResNet50_Weights.DEFAULT", "torchvision:deeplabv3_resnet50"),
    _hub("ic4", "timm inception_v4 pretrained=True", "timm:inception_v4", shape=(1, 3, 299, 299)),
    _hub("deit_tiny", "timm deit_tiny_patch16_224 pretrained=True", "timm:deit_tiny_patch16_224"),
    _hub("mobilebert", "Hugging Face google/mobilebert-uncased", "mobilebert", shape=(1, len(MOBILEBERT_IDS))),
    *(_unavailable(n, "needs torchaudio", ("torchaudio",)) for n in ("emformer_transcribe", "emformer_predict", "emformer_join", "w2l")),
    _unavailable("edsr", "needs torchsr and its hub weights", ("torchsr",)),
    _unavailable("efficient_sam", "downloads its checkpoint from GitHub when built"),
    _unavailable("llama3_2_vision_encoder", "needs torchtune", ("torchtune",)),
    _unavailable("llava", "downloads llava-hf/llava-1.5-7b-hf from Hugging Face"),
    _unavailable("whisper", "downloads openai/whisper from Hugging Face (save it with save_pretrained and use hf:DIR)"),
    _unavailable("yolo26", "needs ultralytics and its hub weights", ("ultralytics",)),
    *(_unavailable(n, _CHECKPOINT.format(folder)) for n, folder in (
        ("qwen2_5_1_5b", "qwen2_5"), ("phi_4_mini", "phi_4_mini"), ("smollm2", "smollm2"), ("qwen3", "qwen3"), ("smolvlm", "smolvlm"),
    )),
)
BY_NAME = {entry.name: entry for entry in ENTRIES}


def registry_names() -> list[str]:
    """The names of ExecuTorch's installed registry, in its order (imports no torch)."""
    from executorch.examples.models import MODEL_NAME_TO_MODEL

    return list(MODEL_NAME_TO_MODEL)


def catalogue() -> list[EtModel]:
    """Every registry name, classified; a name this lowerkit has not vetted is `unavailable`."""
    return [
        BY_NAME.get(name) or _unavailable(name, "not vetted by this lowerkit for offline building (newer ExecuTorch?)")
        for name in registry_names()
    ]


def missing_packages(entry: EtModel) -> list[str]:
    """Of the packages `entry` imports, those not installed (found without importing them)."""
    return [name for name in entry.requires if importlib.util.find_spec(name) is None]


def status(entry: EtModel) -> str:
    """One line: what `et:NAME` builds here, and what it needs (imports no torch)."""
    missing = missing_packages(entry)
    if entry.kind == UNAVAILABLE or missing:
        return f"not buildable here: {entry.note if entry.kind == UNAVAILABLE else 'needs ' + ', '.join(missing)}"
    if entry.kind == UNTRAINED:
        return f"builds here, untrained ({entry.note})"
    if entry.kind == RANDOM:
        return f"builds here with --random-weights ({entry.note})"
    return f"pretrained weights from a hub ({entry.note}): builds here with --random-weights or --weights FILE"


def entry_for(name: str) -> EtModel:
    """The classified registry entry `name`; a UsageError suggests the closest names."""
    names = registry_names()
    if name not in names:
        raise UsageError(f"ExecuTorch's example registry has no model '{name}'.{did_you_mean(name, names, n=3)} (see 'lowerkit models')")
    return next(entry for entry in catalogue() if entry.name == name)


def load(name: str, options: SourceOptions = DEFAULT) -> ModelSource:
    """Build `et:NAME` offline as its classification allows; a UsageError says what to do otherwise."""
    entry = entry_for(name)
    if options.task is not None or options.sequence_length is not None or options.image_size is not None:
        raise UsageError(f"et:{name} takes the registry's example inputs; --task, --sequence-length and --image-size apply to hf: (and --image-size to tv:)")
    if entry.kind == UNAVAILABLE:
        raise UsageError(f"et:{name} cannot be built here: {entry.note}")
    missing = missing_packages(entry)
    if missing:
        raise UsageError(f"et:{name} needs {', '.join(missing)}, which is not installed")
    if entry.kind == HUB:
        if not options.random_weights and options.weights is None:
            raise UsageError(
                f"et:{name} would download its pretrained weights ({entry.note}); lowerkit never downloads: "
                f"pass --random-weights for untrained weights, or --weights FILE with those weights saved locally"
            )
        return _offline_architecture(entry, options)
    if entry.kind == RANDOM and not options.random_weights and options.weights is None:
        raise UsageError(f"et:{name} is {entry.note}; pass --random-weights to build it with those random weights, or --weights FILE")
    if options.random_weights and entry.kind == UNTRAINED:
        raise UsageError(f"et:{name} is untrained already ({entry.note}); drop --random-weights")
    return _from_registry(entry, options)


def _from_registry(entry: EtModel, options: SourceOptions) -> ModelSource:
    import torch
    from executorch.examples.models import MODEL_NAME_TO_MODEL
    from executorch.examples.models.model_factory import EagerModelFactory

    from lowerkit.cli.sources import modules, weights

    folder, class_name = MODEL_NAME_TO_MODEL[entry.name]
    os.environ.setdefault("HF_HUB_OFFLINE", "1")  # the vetted entries fetch nothing; make sure of it
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(SEED)
        made = _guarded(entry, lambda: EagerModelFactory.create_model(folder, class_name))
    module, inputs, kwarg_inputs, dynamic_shapes = made
    if kwarg_inputs or dynamic_shapes:
        raise UsageError(f"et:{entry.name} takes keyword or dynamic-shape inputs, which lowerkit does not support yet")
    module = module.eval()
    if options.weights is not None:
        weights.load_into(module, options.weights, model=f"et:{entry.name}")
    flat, nested = modules.flatten(tuple(inputs))
    if nested:
        module = modules.Unflatten(module, tuple(inputs))
    return _source(entry.name, module, tuple(flat), _notes(entry, options))


def _offline_architecture(entry: EtModel, options: SourceOptions) -> ModelSource:
    import torch

    from lowerkit.cli.sources import weights

    assert entry.architecture is not None
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(SEED)
        module = _guarded(entry, lambda: _build_architecture(entry))
        example = (
            torch.tensor([MOBILEBERT_IDS], dtype=torch.long)
            if entry.architecture == "mobilebert"
            else torch.randn(entry.input_shape)
        )
    module = module.eval()
    if options.weights is not None:
        weights.load_into(module, options.weights, model=f"et:{entry.name}")
    return _source(entry.name, module, (example,), _notes(entry, options))


def _build_architecture(entry: EtModel) -> torch.nn.Module:
    assert entry.architecture is not None
    kind, _, builder = entry.architecture.partition(":")
    if kind == "torchvision":
        from lowerkit.cli.sources import tv

        models = tv.import_torchvision(f"et:{entry.name}")
        module: torch.nn.Module = models.get_model(builder, weights=None)
        return module
    if kind == "timm":
        from lowerkit.cli.sources import tv

        timm = tv.import_timm(f"et:{entry.name}")
        made: torch.nn.Module = timm.create_model(builder, pretrained=False)
        return made
    from transformers import MobileBertConfig, MobileBertModel

    from lowerkit.cli.sources.modules import Logits

    return Logits(MobileBertModel(MobileBertConfig()), output="last_hidden_state")


def _guarded(entry: EtModel, build: Callable[[], Any]) -> Any:
    """Run the registry's code; a failure to import or build is one line naming the entry."""
    try:
        return build()
    except UsageError:
        raise
    except Exception as error:
        text = str(error).strip().splitlines()[0] if str(error).strip() else "no detail"
        raise UsageError(f"building et:{entry.name} failed: {type(error).__name__}: {text}") from None


def _notes(entry: EtModel, options: SourceOptions) -> tuple[str, ...]:
    if options.weights is not None:
        return ()
    if entry.kind == HUB:
        return (f"et:{entry.name} has random (untrained) weights (--random-weights), not {entry.note}",)
    return (f"et:{entry.name} has untrained weights ({entry.note})",)


def _source(name: str, module: torch.nn.Module, inputs: tuple[torch.Tensor, ...], notes: tuple[str, ...]) -> ModelSource:
    from lowerkit.cli.sources.model import ModelSource

    return ModelSource(name=name, example_inputs=inputs, module=module, notes=notes)
