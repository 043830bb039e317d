"""``--task text-generation --prefill N``: an LLM program with prefill and decode methods.

ExecuTorch builds a ``prefill`` method (N tokens at once) beside the decode ``forward`` (one token),
sharing their weights, with one exporter per backend that has one (Core ML:
``export_static_llm_coreml --multifunction``, `Backend.export_llm_prefill_decode`). This runs it
with its own command-line flags: the converted checkpoint and params, ``--max_context_len`` /
``--input_len``, the target's flags (`Backend.llm_prefill_decode_flags`) and the user's
``--llm-override KEY=VALUE`` as ``--KEY VALUE`` (``KEY=true``: ``--KEY``), through the lowering
cache, writing the ``.pte`` atomically.

The cache key: the flags but the output, the checkpoint's and params' content, the backend and the
toolchain's fingerprint.
"""

from __future__ import annotations

import contextlib
import io
import shutil
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path

from lowerkit.cli.backend import Backend
from lowerkit.cli.cache.cached import CacheSettings
from lowerkit.cli.cache.digests import Digest, file_digest
from lowerkit.cli.errors import LoweringError, UsageError
from lowerkit.cli.llm import LlmExport
from lowerkit.cli.progress import Steps
from lowerkit.pass_infra.helpers.files import write_bytes_atomically

__all__ = ["export", "flags_of"]

_KEY_FORMAT = "prefill-decode-1"
_PTE = "<pte>"


def flags_of(overrides: Sequence[str]) -> list[str]:
    """``--llm-override KEY=VALUE`` arguments as the exporter's flags: ``--KEY VALUE`` (``KEY=true``: ``--KEY``)."""
    flags: list[str] = []
    for override in overrides:
        key, separator, value = override.partition("=")
        if not separator or not key or key.startswith("-"):
            raise UsageError(f"'{override}' is not a KEY=VALUE flag of the prefill + decode export (e.g. dtype=fp32)")
        flags += [f"--{key}"] if value.lower() == "true" else [f"--{key}", value]
    return flags


def _key(backend: Backend, flags: Sequence[str], inputs: dict[str, Path]) -> str:
    from lowerkit.cli.cache.key import toolchain_fingerprint

    digest = Digest()
    digest.add("format", _KEY_FORMAT)
    digest.add("backend", backend.family)
    for flag in flags:
        digest.add("flag", flag)
    for flag, path in sorted(inputs.items()):
        digest.add(flag, file_digest(path))
    digest.add("toolchain", toolchain_fingerprint())
    return digest.hexdigest()


def _run(backend: Backend, argv: list[str], folder: Path) -> bytes:
    """The exporter run with `argv`, writing into `folder`: the ``.pte``'s bytes. Its prints are
    kept from the terminal (they are the whole program, twice); a refused flag is one line."""
    pte = folder / "model.pte"
    printed = io.StringIO()
    try:
        with contextlib.redirect_stdout(printed):
            backend.export_llm_prefill_decode([*argv, "--output", str(pte)])
    except SystemExit:  # argparse refused a flag (its message is on stderr)
        raise UsageError(
            f"the {backend.title} prefill + decode export refused a flag (its message is above); "
            "--llm-override KEY=VALUE gives it --KEY VALUE, e.g. dtype=fp32"
        ) from None
    except (AssertionError, ValueError, NotImplementedError, KeyError, RuntimeError) as error:
        raise LoweringError(f"prefill + decode export: {type(error).__name__}: {str(error).splitlines()[0] if str(error) else ''}") from None
    return pte.read_bytes()


def export(
    backend: Backend, flags: list[str], inputs: dict[str, Path], output: Path, *, cache: CacheSettings, steps: Steps
) -> LlmExport:
    """The program `backend`'s prefill + decode exporter builds with `flags` and the input files
    `inputs` (flag -> path) into `output`, through `cache`."""
    from lowerkit.cli.cache import cached
    from lowerkit.cli.cache.entry import Entry

    start = time.perf_counter()
    key = _key(backend, flags, inputs) if cache.enabled else None
    entry = cached.lookup(key, cache) if key is not None else None
    warnings: list[str] = []
    if entry is not None:
        pte, state = entry.blobs[_PTE], "hit"
    else:
        output.parent.mkdir(parents=True, exist_ok=True)
        staging = Path(tempfile.mkdtemp(prefix=".lowerkit-prefill-decode-", dir=output.parent))
        try:
            argv = [*flags, *(part for flag, path in inputs.items() for part in (flag, str(path)))]
            with steps.step("prefill + decode export"):
                pte = _run(backend, argv, staging)
        finally:
            shutil.rmtree(staging, ignore_errors=True)
        state = "off"
        if key is not None:
            state = "miss"
            warnings += cached.store(Entry(key=key, summary={"pte": output.name}, blobs={_PTE: pte}), cache)
    write_bytes_atomically(output, pte)
    return LlmExport(output, [], time.perf_counter() - start, state, warnings)
