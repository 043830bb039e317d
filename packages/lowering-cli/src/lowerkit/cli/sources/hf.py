"""`hf:DIR`: a local Hugging Face folder as `save_pretrained` writes it (config.json + *.safetensors).

Loaded with transformers and no network (HF_HUB_OFFLINE, local_files_only), the head chosen by
task (the config's `architectures`, else `--task`), eager attention and no KV cache, wrapped so
the exported program takes one tensor and returns one (logits, or the encoder's hidden states).
A folder without weights builds seeded random weights, with a warning.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import TYPE_CHECKING, Any

from lowerkit.cli.errors import UsageError
from lowerkit.cli.sources.options import DEFAULT, LLM_TASK, TASKS, SourceOptions
from lowerkit.pass_infra.helpers.suggest import did_you_mean

if TYPE_CHECKING:
    import torch

    from lowerkit.cli.sources.model import ModelSource

#: The seed of random weights and of the example inputs.
SEED = 0
#: The example's tokens when neither --sequence-length nor a smaller position limit says.
DEFAULT_SEQUENCE_LENGTH = 128
#: What a folder holds besides config.json that decides the model (weights, in the cache key too).
WEIGHT_PATTERNS = ("*.safetensors", "*.safetensors.index.json")

#: transformers' Auto class, its model-type table and the output the wrapper returns, per task.
_HEADS = {
    "causal-lm": ("AutoModelForCausalLM", "MODEL_FOR_CAUSAL_LM_MAPPING_NAMES", "logits"),
    "masked-lm": ("AutoModelForMaskedLM", "MODEL_FOR_MASKED_LM_MAPPING_NAMES", "logits"),
    "encoder": ("AutoModel", "MODEL_MAPPING_NAMES", "last_hidden_state"),
    "image-classification": ("AutoModelForImageClassification", "MODEL_FOR_IMAGE_CLASSIFICATION_MAPPING_NAMES", "logits"),
}
#: An `architectures` class name's ending -> its task.
_SUFFIXES = (
    ("ForCausalLM", "causal-lm"), ("LMHeadModel", "causal-lm"), ("ForMaskedLM", "masked-lm"),
    ("ForImageClassification", "image-classification"), ("Model", "encoder"),
)


def weight_files(folder: Path) -> list[Path]:
    """The folder's weight files (safetensors and their shard index), sorted."""
    return sorted({p for pattern in WEIGHT_PATTERNS for p in folder.glob(pattern) if p.is_file()})


def check_folder(folder: Path) -> Path:
    """`folder`'s config.json; a UsageError when it is not a model folder (no torch import)."""
    if not folder.is_dir():
        raise UsageError(f"hf:{folder}: '{folder}' is not a folder (give a folder written by save_pretrained)")
    config = folder / "config.json"
    if not config.is_file():
        raise UsageError(
            f"hf:{folder}: '{folder}' has no config.json; a Hugging Face model folder holds the config.json "
            "and *.safetensors that save_pretrained writes"
        )
    return config


def task_of(architectures: list[str] | None, folder: Path) -> str:
    """The task an `architectures` entry names; a UsageError asking for --task otherwise."""
    if not architectures:
        raise UsageError(f"hf:{folder}: config.json names no architectures; pass --task ({', '.join(TASKS)})")
    name = architectures[0]
    for suffix, task in _SUFFIXES:
        if name.endswith(suffix):
            return task
    raise UsageError(
        f"hf:{folder}: lowerkit builds no head for {name}; pass --task with one of {', '.join(TASKS)} "
        "to lower another head of the same model"
    )


def load(folder: Path, options: SourceOptions = DEFAULT) -> ModelSource:
    """Build the model of `folder` for its task, with example inputs from its config."""
    check_folder(folder)
    if options.random_weights:
        raise UsageError(f"hf:{folder}: --random-weights applies to et:; a folder without *.safetensors builds random weights")
    if options.task == LLM_TASK:
        raise UsageError(f"hf:{folder}: --task {LLM_TASK} builds through ExecuTorch's LLM export: 'lowerkit lower' only")
    if options.task is not None and options.task not in TASKS:
        raise UsageError(f"unknown --task '{options.task}'.{did_you_mean(options.task, TASKS)} One of: {', '.join(TASKS)}")
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    import torch
    import transformers
    from transformers.models.auto import modeling_auto

    from lowerkit.cli.sources import weights
    from lowerkit.cli.sources.model import ModelSource
    from lowerkit.cli.sources.modules import Logits

    try:
        config = transformers.AutoConfig.from_pretrained(str(folder), local_files_only=True, trust_remote_code=False)
    except Exception as error:
        raise UsageError(f"hf:{folder}: transformers {transformers.__version__} cannot read config.json ({_line(error)})") from None
    task = options.task or task_of(getattr(config, "architectures", None), folder)
    auto_name, table_name, output = _HEADS[task]
    table: dict[str, Any] = getattr(modeling_auto, table_name)
    if config.model_type not in table:
        having = [t for t, (_, other, _) in _HEADS.items() if config.model_type in getattr(modeling_auto, other)]
        raise UsageError(
            f"hf:{folder}: transformers has no {task} model for architecture '{config.model_type}'"
            + (f"; it has: {', '.join(having)} (--task)" if having else "")
        )
    try:
        auto = getattr(transformers, auto_name)
        auto.from_config  # noqa: B018 (resolving the class imports transformers' modeling code)
    except Exception as error:
        raise UsageError(_import_failure(error, folder)) from None
    if hasattr(config, "use_cache"):
        config.use_cache = False
    files = [f for f in weight_files(folder) if f.suffix == ".safetensors"]
    for file in files:
        weights.check_safetensors(file)
    notes: list[str] = []
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(SEED)
        if files and options.weights is None:
            model = _from_pretrained(auto, folder, config, task, notes)
        else:
            try:
                model = auto.from_config(config, attn_implementation="eager")
            except Exception as error:
                raise UsageError(_import_failure(error, folder) if _is_import(error) else f"hf:{folder}: building {config.model_type} for {task} failed ({_line(error)})") from None
            if options.weights is not None:
                weights.load_into(model, options.weights, model=f"hf:{folder}")
            else:
                notes.append(f"hf:{folder} holds no *.safetensors weights: built random (untrained) weights")
        model.eval()
        inputs = _example_inputs(config, task, options, folder, model)
    _check_tied(model, config, folder)
    module = Logits(model, output=output, input_name="pixel_values" if task == "image-classification" else "input_ids")
    return ModelSource(name=folder.resolve().name, example_inputs=(inputs,), module=module.eval(), notes=tuple(notes))


def _from_pretrained(auto: Any, folder: Path, config: Any, task: str, notes: list[str]) -> torch.nn.Module:
    """The folder's model with its weights; a UsageError names keys that do not fit.

    For `encoder` (the hidden states), the weights of another task's head are dropped and a
    missing pooler is fine: neither reaches the output.
    """
    try:
        model, info = auto.from_pretrained(
            str(folder), config=config, local_files_only=True, use_safetensors=True, output_loading_info=True,
            attn_implementation="eager",
        )
    except Exception as error:
        raise UsageError(_import_failure(error, folder) if _is_import(error) else f"hf:{folder}: loading the weights failed ({_line(error)})") from None
    problems = []
    for kind in ("missing_keys", "unexpected_keys", "mismatched_keys"):
        keys = sorted(str(k) for k in info.get(kind) or ())
        if task == "encoder" and kind != "mismatched_keys":
            unused = [k for k in keys if kind == "unexpected_keys" or k.split(".")[0] == "pooler"]
            if unused:
                what = "dropped the weights of another head" if kind == "unexpected_keys" else "left the unused pooler untrained"
                notes.append(f"hf:{folder} as an encoder: {what} ({len(unused)} tensors)")
            keys = [k for k in keys if k not in unused]
        if keys:
            shown = ", ".join(keys[:5]) + (f" ... and {len(keys) - 5} more" if len(keys) > 5 else "")
            problems.append(f"{kind.replace('_', ' ')} {len(keys)}: {shown}")
    if problems:
        raise UsageError(f"hf:{folder}: the weights do not fit {type(model).__name__}: {'; '.join(problems)}")
    loaded: torch.nn.Module = model
    return loaded


def _image_shape(config: Any, model: torch.nn.Module) -> tuple[int, int, int] | None:
    """(channels, height, width) the model takes: ``image_size`` (ViT, DeiT ...), else a timm
    model's input size (``timm/*`` folders' ``pretrained_cfg``, else timm's default for the architecture)."""
    size = getattr(config, "image_size", None)
    if size is not None:
        height, width = (size, size) if isinstance(size, int) else tuple(size)
        return getattr(config, "num_channels", 3), height, width
    timm_model = getattr(model, "timm_model", None)  # transformers' TimmWrapper
    for pretrained in (getattr(config, "pretrained_cfg", None), getattr(timm_model, "pretrained_cfg", None)):
        if isinstance(pretrained, dict) and len(pretrained.get("input_size") or ()) == 3:
            channels, height, width = (int(v) for v in pretrained["input_size"])
            return channels, height, width
    return None


def _example_inputs(config: Any, task: str, options: SourceOptions, folder: Path, model: torch.nn.Module) -> torch.Tensor:
    import torch

    generator = torch.Generator().manual_seed(SEED)
    if task == "image-classification":
        if options.sequence_length is not None:
            raise UsageError(f"hf:{folder}: --sequence-length applies to text models; this one takes images (--image-size)")
        shape = _image_shape(config, model)
        if shape is None and options.image_size is None:
            raise UsageError(f"hf:{folder}: config.json gives no image size ({config.model_type}); pass --image-size")
        channels, height, width = shape or (3, 0, 0)
        if options.image_size is not None:
            height = width = options.image_size
        return torch.randn(1, channels, height, width, generator=generator)
    if options.image_size is not None:
        raise UsageError(f"hf:{folder}: --image-size applies to image models; this one takes tokens (--sequence-length)")
    limit = getattr(config, "max_position_embeddings", None) or getattr(config, "n_positions", None)
    length = options.sequence_length or min(limit or DEFAULT_SEQUENCE_LENGTH, DEFAULT_SEQUENCE_LENGTH)
    if limit is not None and length > limit:
        raise UsageError(f"hf:{folder}: --sequence-length {length} is more than the model's {limit} positions")
    vocab = int(getattr(config, "vocab_size", 0) or 0)
    if vocab <= 0:
        raise UsageError(f"hf:{folder}: config.json gives no vocab_size for the example tokens")
    return torch.randint(0, vocab, (1, length), generator=generator)


def _check_tied(model: torch.nn.Module, config: Any, folder: Path) -> None:
    """Embeddings the config ties stay one tensor (a loader that untied them would double the weights)."""
    text = config.get_text_config() if hasattr(config, "get_text_config") else config
    if not getattr(text, "tie_word_embeddings", False):
        return
    embeddings = getattr(model, "get_input_embeddings", lambda: None)()
    head = getattr(model, "get_output_embeddings", lambda: None)()
    if embeddings is None or head is None:
        return
    if head.weight is not embeddings.weight:
        raise UsageError(f"hf:{folder}: the config ties the embeddings to the output head but the loaded model does not")


def _is_import(error: BaseException) -> bool:
    from lowerkit.cli.sources.tv import torchvision_failure

    return isinstance(error, ImportError) or torchvision_failure(error) is not None


def _import_failure(error: BaseException, folder: Path) -> str:
    """One line for transformers failing to import its model code (here: a broken torchvision)."""
    from lowerkit.cli.sources.tv import torchvision_failure

    cause = torchvision_failure(error)
    if cause is not None:
        return f"hf:{folder}: transformers cannot import its models because torchvision cannot import: {cause}"
    return f"hf:{folder}: transformers cannot import its model code ({_line(error)})"


def _line(error: BaseException) -> str:
    text = str(error).strip()
    return f"{type(error).__name__}: {text.splitlines()[0] if text else 'no detail'}"
