"""ExecuTorch's LLM export (``export_llama``, what ``export_llm`` runs), stock and inside lowerkit's scopes.

Models (`MODELS`) are Llama-3-shaped decoders (ExecuTorch's ``llama3`` model class: grouped-query
attention, SwiGLU, RMSNorm, rotary) given as ``params.json`` + a seeded checkpoint written once into a
cache folder (`model_files`): ``export_llama`` without a checkpoint leaves the weights uninitialized,
and stock's own ``.pte`` then differs run to run. Targets (`TARGETS`) are ``LlmConfig`` overrides, each
with the KV cache, static shapes (Core ML needs them) and ``max_seq_length`` `MAX_SEQ_LEN`.

Sides (`SIDES`):

* ``stock``: ``export_llama(config)``;
* ``dropin``: the same call inside lowerkit's scopes (Arm: ``accelerated_arm_quantization()`` +
  ``accelerated_arm_pipeline()``; Core ML: ``accelerated_coreml_llm_export()``, which has
  ``export_llama`` build lowerkit's Core ML partitioner).

The ``coreml-prefill-decode`` target is ExecuTorch's other LLM exporter, the one with ``prefill`` and
decode methods (``export_static_llm_coreml --multifunction``, `PREFILL` tokens, its defaults: fp16,
8-bit embeddings, c4w linears): stock calls the script's ``main``; drop-in is lowerkit's
``export_static_llm`` (the same ``main`` with lowerkit's Core ML backend).

Every flow returns a `bench.realworld_flows.Lowered`: the ``.pte`` bytes and its delegates' payloads,
read back from the file ``export_llama`` wrote (Core ML payloads are compared canonically).
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from bench.realworld_flows import Lowered, _Clock, referenced_models
from lowerkit.cli import targets
from lowerkit.cli.llm import dotlist
from lowerkit.cli.llm import llm_config as parsed

__all__ = [
    "ALL_TARGETS", "COREML_TARGETS", "MAX_SEQ_LEN", "MODELS", "PREFILL", "PREFILL_DECODE", "SIDES", "TARGETS", "export",
    "model_files",
]  # fmt: skip

SIDES = ("stock", "dropin")
MAX_SEQ_LEN = 64
#: The prefill method's tokens of the ``coreml-prefill-decode`` target.
PREFILL = 16
PREFILL_DECODE = "coreml-prefill-decode"

_LLAMA3 = {
    "dim": 512, "n_heads": 8, "n_kv_heads": 2, "vocab_size": 8192, "multiple_of": 256,
    "ffn_dim_multiplier": 1.3, "norm_eps": 1e-5, "rope_theta": 500000.0, "use_scaled_rope": True,
}  # fmt: skip
#: ``params.json`` of each model: a Llama-3-shaped scaling series, and SmolLM2-135M's shape
#: (ExecuTorch's ``examples/models/smollm2`` config: 30 layers, dim 576, 9 / 3 heads, tied embeddings).
MODELS: dict[str, dict[str, Any]] = {
    **{f"llama_{n}l": {**_LLAMA3, "n_layers": n} for n in (1, 2, 4, 8, 16)},
    # CI-sized (tests/llm_export): the same architecture, one layer of dim 64.
    "llama_ci": {**_LLAMA3, "dim": 64, "n_layers": 1, "n_heads": 4, "vocab_size": 512, "multiple_of": 32},
    "smollm2_135m": {
        "dim": 576, "ffn_dim_multiplier": 1, "hidden_dim": 1536, "n_heads": 9, "n_kv_heads": 3,
        "n_layers": 30, "norm_eps": 1e-05, "rope_theta": 10000.0, "use_scaled_rope": False,
        "vocab_size": 49152, "use_hf_rope": False, "attention_qkv_bias": False,
    },
}  # fmt: skip

def _cli(name: str, **extra: Any) -> dict[str, Any]:
    """What ``lowerkit lower --task text-generation -t NAME`` sets (its backend's declaration), and `extra`."""
    target = targets.get(name)
    declared = targets.backend_of(target).llm_overrides(target)
    assert declared is not None, name
    return {**declared, **extra}


#: ``LlmConfig`` overrides per target, as ``export_llm`` takes them (``key=value``): the CLI's own.
TARGETS: dict[str, dict[str, Any]] = {
    **{name: _cli(name) for name in ("tosa-int", "tosa-fp", "ethos-u55-128", "ethos-u85-256", "vgf-int")},
    "ethos-u85-256-16a8w": _cli("ethos-u85-256", **{"quantization.pt2e_quantize": "ethosu_16a8w"}),
    "coreml-fp16": _cli("coreml"),
    "coreml-c4w": _cli("coreml", **{"backend.coreml.quantize": "c4w"}),
    "coreml-8a-c8w": _cli("coreml-int8"),
}
COREML_TARGETS = (*(t for t in TARGETS if t.startswith("coreml")), PREFILL_DECODE)
ALL_TARGETS = (*TARGETS, PREFILL_DECODE)


def _root() -> Path:
    configured = os.environ.get("LOWERKIT_BENCH_LLM")
    return Path(configured) if configured else Path.home() / ".cache" / "lowerkit-bench" / "llm"


def model_files(name: str) -> tuple[Path, Path]:
    """``(params.json, checkpoint.pth)`` of model `name`, written once (weights seeded with 0) into a
    folder named by its params (a changed shape gets new files)."""
    import hashlib

    import torch
    from executorch.examples.models.llama.llama_transformer import construct_transformer
    from executorch.examples.models.llama.model_args import ModelArgs

    shape = hashlib.sha256(json.dumps(MODELS[name], sort_keys=True).encode()).hexdigest()[:12]
    folder = _root() / f"{name}-{shape}"
    params, checkpoint = folder / "params.json", folder / "checkpoint.pth"
    if checkpoint.exists():
        return params, checkpoint
    folder.parent.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(prefix=f".{name}-", dir=folder.parent))
    (staging / "params.json").write_text(json.dumps(MODELS[name], indent=1))
    with torch.random.fork_rng():
        torch.manual_seed(0)
        model = construct_transformer(ModelArgs(**MODELS[name]))
    torch.save(model.state_dict(), staging / "checkpoint.pth")
    try:
        staging.rename(folder)
    except OSError:  # another process made it meanwhile
        shutil.rmtree(staging, ignore_errors=True)
    return params, checkpoint


def overrides(name: str, target: str, output: Path) -> dict[str, Any]:
    """Every ``LlmConfig`` field this case sets, as dotted keys (``export_llm``'s overrides)."""
    params, checkpoint = model_files(name)
    return {
        "base.model_class": "llama3", "base.params": str(params), "base.checkpoint": str(checkpoint),
        "model.use_kv_cache": True, "model.enable_dynamic_shape": False, "model.dtype_override": "fp32",
        "export.max_seq_length": MAX_SEQ_LEN, "export.max_context_length": MAX_SEQ_LEN,
        "export.output_dir": str(output.parent), "export.output_name": str(output),
        **TARGETS[target],
    }  # fmt: skip


def llm_config(values: dict[str, Any]) -> Any:
    """The ``LlmConfig`` ``export_llm`` (and ``lowerkit llm``) builds from the dotted `values`."""
    return parsed(None, dotlist(values))


@contextlib.contextmanager
def _scopes(side: str, target: str) -> Iterator[None]:
    if side == "stock":
        yield
        return
    if target in COREML_TARGETS:
        from lowerkit.coreml_preprocess import accelerated_coreml_llm_export

        with accelerated_coreml_llm_export():
            yield
        return
    from lowerkit.arm_passes import accelerated_arm_pipeline, accelerated_arm_quantization

    with accelerated_arm_quantization(), accelerated_arm_pipeline():
        yield


def _prefill_decode(side: str, name: str, clock: _Clock) -> Lowered:
    """``export_static_llm_coreml --multifunction`` for model `name`, the `side` way: the ``.pte``, and
    the multifunction Core ML models its delegates reference (in the .pte's named data), in order."""
    import importlib
    import sys

    params, checkpoint = model_files(name)
    with tempfile.TemporaryDirectory() as tmp:
        output = Path(tmp) / "model.pte"
        argv = [
            "--checkpoint", str(checkpoint), "--params", str(params), "--output", str(output),
            "--max_context_len", str(MAX_SEQ_LEN), "--input_len", str(PREFILL), "--multifunction",
        ]  # fmt: skip
        with clock("export_static_llm_coreml"):
            if side == "stock":
                script = importlib.import_module("executorch.examples.apple.coreml.llama.export_static_llm_coreml")
                saved, sys.argv = sys.argv, [script.__name__, *argv]
                try:
                    script.main()
                finally:
                    sys.argv = saved
            else:
                from lowerkit.coreml_preprocess.static_llm_export import export_static_llm

                export_static_llm(argv)
        pte = output.read_bytes()
    return Lowered(pte, list(dict.fromkeys(referenced_models(pte))), "coreml", clock.stages)


def export(side: str, name: str, target: str) -> Lowered:
    """``export_llama`` for model `name` and `target` (`PREFILL_DECODE`: the prefill + decode
    exporter), the `side` way; the ``.pte`` it wrote."""
    from executorch.examples.models.llama.export_llama_lib import export_llama

    from lowerkit.cli.pte_file import read_plans

    if side not in SIDES:
        raise ValueError(f"unknown side {side!r}; use one of {SIDES}")
    clock = _Clock()
    if target == PREFILL_DECODE:
        return _prefill_decode(side, name, clock)
    with tempfile.TemporaryDirectory() as tmp:
        output = Path(tmp) / "model.pte"
        config = llm_config(overrides(name, target, output))
        with clock("export_llama"), _scopes(side, target):
            export_llama(config)
        pte = output.read_bytes()
    payloads = [d.payload for plan in read_plans(pte) for d in plan.delegates]
    return Lowered(pte, payloads, "coreml" if target in COREML_TARGETS else "arm", clock.stages)
