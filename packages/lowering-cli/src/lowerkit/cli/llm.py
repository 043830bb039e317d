"""``lowerkit llm``: ExecuTorch's LLM export (``export_llm``'s arguments), faster, through the lowering cache.

    lowerkit llm --config llama3.yaml base.checkpoint=ckpt.pth backend.coreml.enabled=true

The arguments are ``export_llm``'s: ``--config FILE.yaml`` and ``key=value`` overrides of its
``LlmConfig``, merged as it merges them (OmegaConf: the config's structure, then the file, then the
overrides; Hydra's ``+key`` / ``~key`` forms are refused). ExecuTorch's own ``export_llama`` runs
inside the scope of each backend the config enables (`Backend.llm_export_scope`; none enabled:
pass-infra's generic scopes), in a fresh folder beside the destination, and its files go where
stock writes them, each atomically: the ``.pte`` (``export.output_name`` ending in ``.pte`` as it
is, else under ``export.output_dir``) and whatever else it wrote there (e.g. an ETRecord).

The cache key: the merged config but where it writes, the files it names by content (checkpoint,
params, tokenizer, adapter), and the toolchain's fingerprint (versions and lowerkit's source).
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import shutil
import tempfile
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from lowerkit.cli._upstream import llm_config_module
from lowerkit.cli.cache.cached import CacheSettings
from lowerkit.cli.cache.digests import file_digest
from lowerkit.cli.errors import LoweringError, UsageError
from lowerkit.cli.progress import Steps
from lowerkit.pass_infra.helpers.files import write_bytes_atomically

__all__ = ["LlmExport", "dotlist", "export", "llm_config"]

#: ``LlmConfig`` fields naming files whose content decides the program.
_INPUT_FILES = (
    "base.checkpoint", "base.params", "base.tokenizer_path", "base.lora_config.adapter_checkpoint",
    "base.lora_config.adapter_config", "model.input_prune_map", "model.output_prune_map",
)  # fmt: skip
_KEY_FORMAT = "1"
#: The .pte among a cache entry's files (the others keep the names export_llama gave them).
PTE = "<pte>"


@dataclass
class LlmExport:
    """What ``lowerkit llm`` wrote: the ``.pte`` and any other file, its seconds, the cache's part."""

    pte: Path
    files: list[Path] = field(default_factory=list)
    seconds: float = 0.0
    cache: str = "off"
    warnings: list[str] = field(default_factory=list)
    #: The tokenizer ExecuTorch's LLM runner takes with this program (``--tokenizer_path``), if known.
    tokenizer: Path | None = None


def dotlist(values: dict[str, Any]) -> list[str]:
    """Dotted ``LlmConfig`` `values` as ``export_llm``'s ``key=value`` arguments (a JSON value quoted)."""

    def text(value: Any) -> str:
        if isinstance(value, bool):
            return str(value).lower()
        return f"'{value}'" if isinstance(value, str) and value.startswith(("{", "[")) else str(value)

    return [f"{key}={text(value)}" for key, value in values.items()]


def llm_config(config_file: Path | None, overrides: Sequence[str], *, light: bool = False) -> Any:
    """The ``LlmConfig`` ``export_llm`` builds from `config_file` and `overrides`; a UsageError naming a bad one.

    `light`: of the ``LlmConfig`` class loaded without torch (`_upstream.llm_config_module`), so a
    cache hit imports no torch; `export` takes either.
    """
    from omegaconf import OmegaConf  # pants: no-infer-dep (ExecuTorch's own dependency)
    from omegaconf.errors import OmegaConfBaseException  # pants: no-infer-dep

    for override in overrides:
        if "=" not in override or override.startswith(("+", "~")):
            raise UsageError(f"'{override}' is not a key=value override of LlmConfig (e.g. backend.coreml.enabled=true)")
    config_class = llm_config_module().LlmConfig if light else _executorch_config_class()
    try:
        layers = [OmegaConf.structured(config_class)]
        if config_file is not None:
            layers.append(OmegaConf.load(config_file))
        layers.append(OmegaConf.from_dotlist(list(overrides)))
        return OmegaConf.to_object(OmegaConf.merge(*layers))
    except OSError as error:
        raise UsageError(f"cannot read the config {config_file}: {error.strerror or error}") from None
    except OmegaConfBaseException as error:
        raise UsageError(f"invalid LlmConfig: {str(error).splitlines()[0]}") from None


def _field(config: Any, dotted: str) -> Any:
    value = config
    for part in dotted.split("."):
        value = getattr(value, part, None)
    return value


def cache_key(config: Any) -> str:
    """The hex SHA-256 naming the export of `config` (see the module docstring)."""
    import dataclasses

    from omegaconf import OmegaConf  # pants: no-infer-dep

    from lowerkit.cli.cache.key import toolchain_fingerprint

    copy = dataclasses.replace(config, export=dataclasses.replace(config.export, output_dir=".", output_name=None))
    digest = hashlib.sha256()
    for tag, value in (
        ("format", _KEY_FORMAT),
        ("config", OmegaConf.to_yaml(OmegaConf.structured(copy))),
        *((name, _input_digest(_field(config, name))) for name in _INPUT_FILES),
        ("toolchain", toolchain_fingerprint()),
    ):
        raw = value.encode()
        digest.update(f"{tag}:{len(raw)}:".encode() + raw)
    return digest.hexdigest()


def _input_digest(path: Any) -> str:
    """The content digest of an input file the config names ("none" when it names none)."""
    if not path:
        return "none"
    try:
        return file_digest(Path(path))
    except OSError as error:
        raise UsageError(f"cannot read {path}: {error.strerror or error}") from None


def _destination(config: Any) -> tuple[Path, str | None]:
    """(the folder stock writes into, the .pte path stock uses verbatim or None)."""
    name = config.export.output_name
    if name and name.endswith(".pte"):
        return Path(name).parent, name
    return Path(config.export.output_dir), None


@contextlib.contextmanager
def _scopes(config: Any) -> Iterator[None]:
    from lowerkit.cli.targets import BACKENDS

    scopes = [s for s in (b.llm_export_scope(config) for b in BACKENDS.values()) if s is not None]
    with contextlib.ExitStack() as stack:
        if not scopes:
            from lowerkit.pass_infra.accelerations.lowering import accelerated_lowering
            from lowerkit.pass_infra.accelerations.quantization import accelerated_quantization

            scopes = [accelerated_quantization(), accelerated_lowering()]
        for scope in scopes:
            stack.enter_context(scope)
        yield


def _executorch_config_class() -> Any:
    from executorch.extension.llm.export.config.llm_config import LlmConfig

    return LlmConfig


def _executorch_config(config: Any) -> Any:
    """`config` as ExecuTorch's own ``LlmConfig`` (the one ``export_llama`` takes), the same values."""
    from omegaconf import OmegaConf  # pants: no-infer-dep

    config_class = _executorch_config_class()
    if isinstance(config, config_class):
        return config
    values = OmegaConf.to_container(OmegaConf.structured(config), enum_to_str=True)
    return OmegaConf.to_object(OmegaConf.merge(OmegaConf.structured(config_class), values))


def _run(config: Any, folder: Path) -> tuple[str, dict[str, bytes]]:
    """``export_llama`` writing into `folder`: the .pte's name, and every file it wrote there by
    relative name (the .pte as `PTE`)."""
    import dataclasses

    from executorch.examples.models.llama.export_llama_lib import export_llama

    config = _executorch_config(config)

    name = config.export.output_name
    if name and name.endswith(".pte"):
        name = str(folder / Path(name).name)
    local = dataclasses.replace(config, export=dataclasses.replace(config.export, output_dir=str(folder), output_name=name))
    try:
        with _scopes(local):
            written = Path(export_llama(local))
    except (AssertionError, ValueError, NotImplementedError, KeyError) as error:  # export_llama's checks
        raise LoweringError(f"export_llama: {type(error).__name__}: {str(error).splitlines()[0] if str(error) else ''}") from None
    files = {str(p.relative_to(folder)): p.read_bytes() for p in sorted(folder.rglob("*")) if p.is_file()}
    files[PTE] = files.pop(str(written.resolve().relative_to(folder.resolve())))
    return written.name, files


def _write(pte_name: str, files: dict[str, bytes], config: Any) -> tuple[Path, list[Path]]:
    folder, verbatim = _destination(config)
    pte = Path(verbatim) if verbatim else folder / pte_name
    pte.parent.mkdir(parents=True, exist_ok=True)
    write_bytes_atomically(pte, files[PTE])
    others = []
    for name, data in files.items():
        if name != PTE:
            path = folder / name
            path.parent.mkdir(parents=True, exist_ok=True)
            write_bytes_atomically(path, data)
            others.append(path)
    return pte, others


def export(config: Any, *, cache: CacheSettings, steps: Steps) -> LlmExport:
    """Export `config` as ``export_llm`` does (see the module docstring), through `cache`."""
    from lowerkit.cli.cache import cached
    from lowerkit.cli.cache.entry import Entry

    start = time.perf_counter()
    key = None
    if cache.enabled:
        with steps.step("cache key"):
            key = cache_key(config)
    entry = cached.lookup(key, cache) if key is not None else None
    warnings: list[str] = []
    if entry is not None:
        pte_name, files, state = str(entry.summary["pte"]), entry.blobs, "hit"
    else:
        folder, _ = _destination(config)
        folder.mkdir(parents=True, exist_ok=True)
        staging = Path(tempfile.mkdtemp(prefix=".lowerkit-llm-", dir=folder))
        try:
            with steps.step("export_llama"):
                pte_name, files = _run(config, staging)
        finally:
            shutil.rmtree(staging, ignore_errors=True)
        state = "off"
        if key is not None:
            state = "miss"
            warnings += cached.store(Entry(key=key, summary={"pte": pte_name}, blobs=files), cache)
    pte, others = _write(pte_name, files, config)
    tokenizer = Path(config.base.tokenizer_path) if config.base.tokenizer_path else None
    return LlmExport(pte, others, time.perf_counter() - start, state, warnings, tokenizer)


def relative(path: Path) -> str:
    """`path` as the user reads it: relative to the working directory when under it."""
    with contextlib.suppress(ValueError):
        return str(path.resolve().relative_to(Path(os.getcwd()).resolve()))
    return str(path)
