"""``lowerkit lower hf:DIR --task text-generation``: a program ExecuTorch's LLM runner generates with.

The folder is converted (`sources.hf_llm.prepare`), the target's backend says how ExecuTorch's LLM
export builds that target (`Backend.llm_overrides`), ``--llm-override KEY=VALUE`` refines it with
``export_llm``'s own keys (e.g. ``backend.coreml.quantize=c4w``), and `llm.export` runs
``export_llama`` inside lowerkit's scopes, through the lowering cache, writing the ``.pte`` atomically.
With ``--prefill N`` the program has a ``prefill`` method (N tokens) beside the decode ``forward``,
from the backend's own exporter of that shape (`prefill_decode`; Core ML only in ExecuTorch).
The folder's tokenizer (`hf_llm.tokenizer_of`) is named beside it, for the runner; a folder
without one gets a warning (the program builds, but nothing can generate text from it yet).
"""

from __future__ import annotations

import contextlib
import dataclasses
import shutil
from collections.abc import Iterator, Sequence
from pathlib import Path

from lowerkit.cli import llm, targets
from lowerkit.cli.backend import Backend
from lowerkit.cli.cache.cached import CacheSettings
from lowerkit.cli.errors import UsageError
from lowerkit.cli.options import Target
from lowerkit.cli.progress import Steps
from lowerkit.cli.sources import hf_llm

__all__ = ["lower", "supported_targets"]


def supported_targets(*, prefill: bool = False) -> list[str]:
    """The targets ExecuTorch's LLM export builds (`prefill`: with prefill + decode methods), by name."""
    found = []
    for name, target in targets.TARGETS.items():
        backend = targets.backend_of(target)
        declared = backend.llm_prefill_decode_flags(target) if prefill else backend.llm_overrides(target)
        if declared is not None:
            found.append(name)
    return found


def lower(
    model: str,
    target: Target,
    output: Path,
    *,
    max_seq_len: int,
    overrides: Sequence[str],
    cache: CacheSettings,
    steps: Steps,
    prefill: int | None = None,
) -> llm.LlmExport:
    """Export the Hugging Face folder `model` (``hf:DIR``) for `target` into `output` (see the module
    docstring); with `prefill`, with prefill (that many tokens) and decode methods (`prefill_decode`)."""
    if not model.startswith("hf:"):
        raise UsageError(f"--task {hf_llm.TASK} builds from a Hugging Face folder (hf:DIR), not '{model}'")
    if output.suffix != ".pte":
        raise UsageError(f"--task {hf_llm.TASK} writes a .pte: name the output FILE.pte, not '{output}'")
    backend = targets.backend_of(target)
    folder = Path(model.removeprefix("hf:"))
    if prefill is None:
        done = _export_llm(backend, target, folder, output, max_seq_len, overrides, cache=cache, steps=steps)
    else:
        done = _prefill_decode(backend, target, folder, output, max_seq_len, prefill, overrides, cache=cache, steps=steps)
    tokenizer = hf_llm.tokenizer_of(folder)
    if tokenizer is None:
        done.warnings.append(
            f"{folder} has no {' or '.join(hf_llm.TOKENIZER_FILES)}: ExecuTorch's LLM runner needs one to generate text"
        )
    return dataclasses.replace(done, tokenizer=tokenizer)


def _export_llm(
    backend: Backend, target: Target, folder: Path, output: Path, max_seq_len: int, overrides: Sequence[str], *,
    cache: CacheSettings, steps: Steps,
) -> llm.LlmExport:
    """ExecuTorch's LLM export of `folder` (``export_llama``, one ``forward``)."""
    settings = backend.llm_overrides(target)
    if settings is None:
        raise UsageError(_no_such_target(target, None))
    with _converted(folder, cache, steps) as prepared:
        values = hf_llm.llm_values(prepared, settings, max_seq_len=max_seq_len, output=output)
        config = llm.llm_config(None, [*llm.dotlist(values), *overrides], light=True)
        return llm.export(config, cache=cache, steps=steps)


def _prefill_decode(
    backend: Backend, target: Target, folder: Path, output: Path, max_seq_len: int, prefill: int,
    overrides: Sequence[str], *, cache: CacheSettings, steps: Steps,
) -> llm.LlmExport:
    """The backend's prefill + decode export of `folder` (`prefill_decode`)."""
    from lowerkit.cli import prefill_decode

    target_flags = backend.llm_prefill_decode_flags(target)
    if target_flags is None:
        raise UsageError(_no_such_target(target, prefill))
    if prefill >= max_seq_len:
        raise UsageError(f"--prefill {prefill} leaves no room in the KV cache: make it less than --max-seq-len ({max_seq_len})")
    config = hf_llm.read_config(folder)
    hf_llm.check_max_seq_len(config, max_seq_len)
    family = hf_llm.family_of(config, folder)
    if family.no_prefill_decode is not None:
        raise UsageError(f"ExecuTorch's prefill + decode export cannot build {family.title}: {family.no_prefill_decode}")
    flags = [
        "--max_context_len", str(max_seq_len), "--input_len", str(prefill), "--multifunction",
        *target_flags, *prefill_decode.flags_of(overrides),
    ]  # fmt: skip
    with _converted(folder, cache, steps) as prepared:
        inputs = {"--checkpoint": prepared.checkpoint, "--params": prepared.params}
        return prefill_decode.export(backend, flags, inputs, output, cache=cache, steps=steps)


@contextlib.contextmanager
def _converted(folder: Path, cache: CacheSettings, steps: Steps) -> Iterator[hf_llm.Prepared]:
    """`folder` converted for ExecuTorch (kept in the cache folder; with the cache off, removed after)."""
    with steps.step("convert the weights"):
        prepared = hf_llm.prepare(folder, keep=cache.enabled)
    try:
        yield prepared
    finally:
        if not cache.enabled:
            shutil.rmtree(prepared.checkpoint.parent, ignore_errors=True)


def _no_such_target(target: Target, prefill: int | None) -> str:
    if prefill is None:
        return (
            f"ExecuTorch's LLM export has no target like {target.name}; with --task {hf_llm.TASK} use one of: "
            f"{', '.join(supported_targets())} (export_llm's other settings: --llm-override KEY=VALUE)"
        )
    return (
        f"ExecuTorch builds prefill + decode methods for no target like {target.name}; with --prefill use one of: "
        f"{', '.join(supported_targets(prefill=True))}"
    )
