"""`hf:DIR --task text-generation`: a local Hugging Face decoder folder through ExecuTorch's LLM export.

The program ExecuTorch's LLM runner generates with: ``export_llama`` (`lowerkit.cli.llm`) with the
KV cache, static shapes, ``--max-seq-len`` positions and the runner's metadata methods (with the
folder's BOS / EOS ids), for the target's backend (`Backend.llm_overrides`).

* The weights are converted offline by ExecuTorch's own converter for the family (`FAMILIES`,
  `lowerkit.cli.sources.converters`) into Meta's layout, once per folder content: the converted
  checkpoint is kept under lowerkit's cache folder (``hf-llm/``; a temporary one with --no-cache).
* config.json becomes the ``params.json`` of ExecuTorch's ``ModelArgs`` (`params_of`), as
  ExecuTorch's own config files for these models spell it: Hugging Face's rotary layout
  (``use_hf_rope``, so the converters do not permute q / k), the family's attention options, the
  rotary scaling ExecuTorch models (Llama 3's, LongRoPE).
"""

from __future__ import annotations

import json
import shutil
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from lowerkit.cli.errors import UsageError
from lowerkit.cli.sources.options import LLM_TASK as TASK

__all__ = [
    "DEFAULT_MAX_SEQ_LEN", "FAMILIES", "TASK", "TOKENIZER_FILES", "Family", "Prepared", "check_max_seq_len", "family_of",
    "llm_values", "params_of", "prepare", "read_config", "tokenizer_of",
]  # fmt: skip

#: `--max-seq-len` when not given: the KV cache's positions (prompt and generated tokens).
DEFAULT_MAX_SEQ_LEN = 128
_CONVERTERS = "executorch.examples.models"
_FORMAT = "1"  # of the converted folder: bump when the conversion or the params change
#: The tokenizer files ExecuTorch's LLM runner reads (``--tokenizer_path``), in the order chosen.
TOKENIZER_FILES = ("tokenizer.json", "tokenizer.model")


@dataclass(frozen=True)
class Family:
    """A decoder family ExecuTorch's LLM export builds: its converter and its fixed ``ModelArgs``."""

    #: What the family covers, for listings ("Qwen 2.5").
    title: str
    #: ExecuTorch's converter: (module under executorch.examples.models, function on the state dict).
    converter: tuple[str, str]
    #: ``LlmConfig.base.model_class``.
    model_class: str
    #: ``ModelArgs`` fields every model of the family sets.
    params: dict[str, Any] = field(default_factory=dict)
    #: Why ExecuTorch's prefill + decode export (``--prefill``) cannot build the family; None: it can.
    no_prefill_decode: str | None = None


#: By config.json's ``model_type``.
FAMILIES: dict[str, Family] = {
    # ExecuTorch converts SmolLM2 through torchtune's checkpointer; the Llama architecture is Qwen
    # 2.5's without the q / k / v biases, so its converter maps the same names.
    "llama": Family("Llama 3.x, SmolLM2", ("qwen2_5.convert_weights", "qwen_2_5_hf_to_meta"), "llama3"),
    "qwen2": Family(
        "Qwen 2.5", ("qwen2_5.convert_weights", "qwen_2_5_hf_to_meta"), "qwen2_5_0_5b", {"attention_qkv_bias": True},
        no_prefill_decode="it splits linear layers without their biases (SplitLinearModule) and Qwen 2.5's q / k / v have biases",
    ),
    "qwen3": Family(
        "Qwen 3", ("qwen3.convert_weights", "qwen_3_tune_to_meta"), "qwen3_0_6b",
        {"use_qk_norm": True, "qk_norm_before_rope": True},
        no_prefill_decode="it loads no q / k norm weights, and coremltools cannot convert its float16 RMSNorm of them",
    ),
    "phi3": Family(
        "Phi-4-mini", ("phi_4_mini.convert_weights", "phi_4_hf_to_meta"), "phi_4_mini",
        no_prefill_decode="its static attention rotates whole heads, and Phi-4-mini rotates 3/4 of each (partial_rotary_factor)",
    ),
}  # fmt: skip


@dataclass(frozen=True)
class Prepared:
    """A folder ready for ``export_llama``: Meta's checkpoint, its params.json, its family and config.json."""

    checkpoint: Path
    params: Path
    family: Family
    config: dict[str, Any]


def tokenizer_of(folder: Path) -> Path | None:
    """The folder's tokenizer file for ExecuTorch's LLM runner (`TOKENIZER_FILES`), None without one."""
    return next((folder / name for name in TOKENIZER_FILES if (folder / name).is_file()), None)


def read_config(folder: Path) -> dict[str, Any]:
    from lowerkit.cli.sources.hf import check_folder

    try:
        config: dict[str, Any] = json.loads(check_folder(folder).read_text())
    except (OSError, ValueError) as error:
        raise UsageError(f"hf:{folder}: cannot read config.json ({error})") from None
    return config


def family_of(config: dict[str, Any], folder: Path) -> Family:
    """The family of config.json's ``model_type``; a UsageError naming those that build."""
    model_type = config.get("model_type")
    if model_type not in FAMILIES:
        known = ", ".join(f"{name} ({family.title})" for name, family in FAMILIES.items())
        raise UsageError(f"hf:{folder}: --task {TASK} builds no '{model_type}' decoder; it builds: {known}")
    return FAMILIES[model_type]


def _rope(config: dict[str, Any], folder: Path) -> tuple[float, dict[str, Any]]:
    """(rope_theta, the ``ModelArgs`` fields of the rotary scaling); a UsageError for one ExecuTorch lacks."""
    parameters = dict(config.get("rope_parameters") or {})
    scaling = dict(config.get("rope_scaling") or {}) or parameters
    theta = float(parameters.get("rope_theta", config.get("rope_theta", 10000.0)))
    kind = scaling.get("rope_type", scaling.get("type", "default"))
    if kind == "default":
        return theta, {}
    if kind == "llama3":
        # ExecuTorch's rope.apply_scaling fixes low_freq_factor 1 and an original context of 8192.
        fixed = {"low_freq_factor": 1, "original_max_position_embeddings": 8192}
        if any(float(scaling.get(k, v)) != v for k, v in fixed.items()):
            raise UsageError(f"hf:{folder}: ExecuTorch's Llama 3 rotary scaling fixes {fixed}; config.json has {scaling}")
        return theta, {
            "use_scaled_rope": True, "rope_scale_factor": scaling["factor"],
            "high_freq_factor": scaling.get("high_freq_factor", 4),
        }  # fmt: skip
    if kind == "longrope":
        return theta, {
            "rope_scaling_short_factor": scaling["short_factor"], "rope_scaling_long_factor": scaling["long_factor"],
            "original_max_position_embeddings": config.get("original_max_position_embeddings"),
            "max_position_embeddings": config.get("max_position_embeddings"),
            "rope_scaling_attention_factor": scaling.get("attention_factor"),
        }  # fmt: skip
    raise UsageError(f"hf:{folder}: ExecuTorch's LLM export has no '{kind}' rotary scaling (it has llama3 and longrope)")


def params_of(config: dict[str, Any], folder: Path) -> dict[str, Any]:
    """The ``params.json`` (``ModelArgs`` fields) of a Hugging Face decoder's config.json."""
    family = family_of(config, folder)
    if config.get("hidden_act", "silu") != "silu":
        raise UsageError(f"hf:{folder}: ExecuTorch's decoder uses SiLU; config.json has hidden_act {config['hidden_act']}")
    if config.get("use_sliding_window") or config.get("mlp_bias"):
        raise UsageError(f"hf:{folder}: ExecuTorch's {family.title} decoder has no sliding window and no MLP bias")
    if config.get("model_type") == "llama" and config.get("attention_bias"):
        raise UsageError(f"hf:{folder}: ExecuTorch's Llama decoder has no attention biases (config.json: attention_bias)")
    theta, scaling = _rope(config, folder)
    heads = int(config["num_attention_heads"])
    params = {
        "dim": config["hidden_size"], "hidden_dim": config["intermediate_size"], "n_layers": config["num_hidden_layers"],
        "n_heads": heads, "n_kv_heads": config.get("num_key_value_heads") or heads,
        "head_dim": config.get("head_dim") or config["hidden_size"] // heads,
        "vocab_size": config["vocab_size"], "norm_eps": config.get("rms_norm_eps", 1e-6), "rope_theta": theta,
        "use_hf_rope": True, "use_scaled_rope": False, "attention_qkv_bias": False,
        **family.params, **scaling,
    }  # fmt: skip
    partial = (config.get("rope_parameters") or {}).get("partial_rotary_factor", config.get("partial_rotary_factor"))
    if partial is not None:
        params["partial_rotary_factor"] = partial
    return params


def _metadata(config: dict[str, Any]) -> str | None:
    """``base.metadata``: the BOS / EOS ids the runner reads, from config.json (None when it has none)."""
    found: dict[str, Any] = {}
    if isinstance(config.get("bos_token_id"), int):
        found["get_bos_id"] = config["bos_token_id"]
    eos = config.get("eos_token_id")
    if eos is not None:
        found["get_eos_ids"] = eos if isinstance(eos, list) else [eos]
    return json.dumps(found, sort_keys=True) if found else None


def _convert(folder: Path, config: dict[str, Any], family: Family, params: dict[str, Any], into: Path) -> None:
    """Meta's checkpoint (``checkpoint.pth``) of `folder` and its `params` (``params.json``), written into `into`."""
    import torch
    from executorch.examples.models.qwen3.convert_weights import load_checkpoint_from_safetensors

    from lowerkit.cli.sources.converters import converter

    module, function = family.converter
    convert = converter(f"{_CONVERTERS}.{module}", function)
    try:
        state = load_checkpoint_from_safetensors(str(folder))
    except FileNotFoundError:
        raise UsageError(f"hf:{folder}: holds no model.safetensors (or its shard index); --task {TASK} needs the weights") from None
    meta = convert(state)
    if "output.weight" not in meta and config.get("tie_word_embeddings"):
        meta["output.weight"] = meta["tok_embeddings.weight"]  # as ExecuTorch's Qwen converters tie them
    torch.save(meta, into / "checkpoint.pth")
    (into / "params.json").write_text(json.dumps(params, indent=1, sort_keys=True) + "\n")


def _folder_digest(folder: Path, family: Family) -> str:
    from lowerkit.cli.cache.digests import Digest, file_digest
    from lowerkit.cli.cache.key import distribution_version
    from lowerkit.cli.sources.hf import weight_files

    digest = Digest()
    digest.add("format", _FORMAT)
    digest.add("executorch", distribution_version("executorch"))
    digest.add("converter", ".".join(family.converter))
    for path in (folder / "config.json", *weight_files(folder)):
        digest.add("name", path.name)
        digest.add("bytes", file_digest(path))
    return digest.hexdigest()


def prepare(folder: Path, *, keep: bool) -> Prepared:
    """Convert `folder` (see the module docstring); `keep`: in lowerkit's cache folder, once per content."""
    config = read_config(folder)
    family = family_of(config, folder)
    params = params_of(config, folder)  # its errors before any conversion
    if keep:
        from lowerkit.cli.cache.store import default_directory

        converted = default_directory() / "hf-llm" / _folder_digest(folder, family)
        if not (converted / "checkpoint.pth").is_file():
            converted.parent.mkdir(parents=True, exist_ok=True)
            staging = Path(tempfile.mkdtemp(prefix=".converting-", dir=converted.parent))
            try:
                _convert(folder, config, family, params, staging)
                staging.rename(converted)
            except OSError:  # another process converted it meanwhile
                if not (converted / "checkpoint.pth").is_file():
                    raise
            finally:
                shutil.rmtree(staging, ignore_errors=True)
    else:
        converted = Path(tempfile.mkdtemp(prefix="lowerkit-hf-llm-"))
        _convert(folder, config, family, params, converted)
    return Prepared(converted / "checkpoint.pth", converted / "params.json", family, config)


def check_max_seq_len(config: dict[str, Any], max_seq_len: int) -> None:
    """A UsageError when `max_seq_len` is more than the model's positions (config.json)."""
    limit = config.get("max_position_embeddings")
    if limit is not None and max_seq_len > int(limit):
        raise UsageError(f"--max-seq-len {max_seq_len} is more than the model's {limit} positions")


def llm_values(prepared: Prepared, backend: dict[str, Any], *, max_seq_len: int, output: Path) -> dict[str, Any]:
    """Every ``LlmConfig`` field the export sets, as dotted keys (``export_llm``'s overrides)."""
    check_max_seq_len(prepared.config, max_seq_len)
    values: dict[str, Any] = {
        "base.model_class": prepared.family.model_class,
        "base.checkpoint": str(prepared.checkpoint), "base.params": str(prepared.params),
        "model.use_kv_cache": True, "model.enable_dynamic_shape": False,
        "export.max_seq_length": max_seq_len, "export.max_context_length": max_seq_len,
        "export.output_dir": str(output.parent), "export.output_name": str(output),
        **backend,
    }  # fmt: skip
    metadata = _metadata(prepared.config)
    if metadata is not None:
        values["base.metadata"] = metadata
    return values

