"""The cache key: one SHA-256 over everything that decides a lowering's bytes.

Covered: every field of `LowerOptions` and of its backend's settings (walked generically, files
named by path digested by content), the exported program (graph, signature, every weight and
constant), the example inputs' shapes and dtypes, the calibration tensors, the source of
lowerkit's packages, the versions of the toolchain, the machine's kind of CPU kernels
(calibration rounds differently on AVX-512, AVX2 and scalar kernels) and what the target's
backend adds (`Backend.cache_key_extras`: for the VGF targets, a model converter binary of the
user's own by content). Nothing here lowers; exporting is cheap next to lowering.

A `zoo:NAME` model needs none of that built: its module, weights, example inputs and
calibration sampler are a function of lowerkit's zoo source (digested) and torch's version,
the same on every machine (`lowerkit.zoo.registry.portable_init`), so `zoo_key` digests the
name instead, and a hit imports neither torch nor ExecuTorch. `source_key` does the same for
the other sources whose program is a function of files and names (`.pt2` by its bytes, `hf:DIR`
by its config and weight files, `et:` / `tv:` by name and the versions that build them, with
every `SourceOptions` field, weights files by content); only `package.module:factory` models
are exported to be keyed (`lowering_key`).
"""

from __future__ import annotations

import contextlib
import dataclasses
import enum
import hashlib
import importlib.metadata
import os
import platform
import re
import sys
from collections.abc import Iterable, Sequence
from functools import cache
from pathlib import Path
from typing import TYPE_CHECKING, Any

from lowerkit.cli.cache.digests import Digest, file_digest, path_digest
from lowerkit.cli.options import LowerOptions

if TYPE_CHECKING:
    import torch

    from lowerkit.cli.sources.model import Inputs, ModelSource
    from lowerkit.cli.sources.options import SourceOptions

#: Bumped when the key or the entry layout changes meaning (2: a backend's files under "extra/", its report
#: fields under "report", its settings as one `LowerOptions.settings` field).
KEY_FORMAT = "lowerkit-lowering-cache-2"

#: Distributions whose versions decide the bytes, whatever the backend (each adds its `Backend.toolchain`).
TOOLCHAIN = ("torch", "executorch", "torchao", "numpy")

#: lowerkit's packages every lowering runs: their versions and their source (a source edit is a new
#: key); each backend adds its `Backend.lowerkit_packages`.
LOWERKIT_PACKAGES = (("lowerkit-pass-infra", "pass_infra"), ("lowerkit", "cli"), ("lowerkit", "zoo"))

#: CPU flags that choose torch's kernels (x86: AVX-512 / AVX2 / scalar; Arm: NEON / SVE).
VECTOR_FLAGS = frozenset(
    {"avx", "avx2", "fma", "f16c", "avx512f", "avx512bw", "avx512vl", "avx512dq", "avx512_vnni", "avx512_bf16",
     "amx_tile", "asimd", "sve", "sve2", "bf16", "i8mm"}
)

_ADDRESS = re.compile(r" at 0x[0-9a-f]+")


def lowering_key(source: ModelSource, options: LowerOptions, calibration: Sequence[Inputs]) -> str:
    """The hex SHA-256 naming the lowering of `source` with `options` on `calibration`."""
    digest = Digest()
    digest.add("format", KEY_FORMAT)
    digest.add("model-name", source.name)
    digest.add("options", options_fingerprint(options))
    digest.add("program", program_fingerprint(source.export()))
    digest.add("example-inputs", _tensors_fingerprint(source.example_inputs, values=False))
    for index, batch in enumerate(calibration):
        digest.add(f"calibration-{index}", _tensors_fingerprint(batch, values=True))
    digest.add("toolchain", toolchain_fingerprint())
    _add_backend_extras(digest, options)
    return digest.hexdigest()


def zoo_key(name: str, options: LowerOptions) -> str:
    """The hex SHA-256 naming the lowering of zoo model `name` with `options` (no torch import)."""
    digest = Digest()
    digest.add("format", KEY_FORMAT)
    digest.add("zoo-model", name)
    digest.add("options", options_fingerprint(options))
    digest.add("toolchain", toolchain_fingerprint())
    _add_backend_extras(digest, options)
    return digest.hexdigest()


#: Distributions that build each source's model (their versions are in its key).
SOURCE_BUILDERS = {
    "et": ("torchvision", "timm", "transformers", "safetensors"),
    "tv": ("torchvision", "safetensors"),
    "hf": ("transformers", "safetensors", "tokenizers"),
    "zoo": ("safetensors",),
    "pt2": (),
}


def source_key(model: str, source_options: SourceOptions, options: LowerOptions) -> str | None:
    """The key of lowering MODEL argument `model` without building it, or None for a factory model.

    What decides the program is digested instead of the program: a `.pt2`'s bytes, an `hf:`
    folder's config.json and weight files, an `et:` / `tv:` / `zoo:` name with the versions of
    what builds it; with every field of `source_options` (a weights file by content). The zoo
    key is `zoo_key` when no source option is set. Imports no torch.
    """
    from lowerkit.cli.sources.kinds import kind_of
    from lowerkit.cli.sources.options import DEFAULT

    kind = kind_of(model)
    if kind == "factory":
        return None
    if kind == "zoo" and source_options == DEFAULT:
        return zoo_key(model.removeprefix("zoo:"), options)
    digest = Digest()
    digest.add("format", KEY_FORMAT)
    digest.add("source-kind", kind)
    if kind == "pt2":
        path = Path(model)
        digest.add("model-name", path.stem)
        digest.add("pt2-bytes", file_digest(path))
    elif kind == "hf":
        from lowerkit.cli.sources.hf import check_folder, weight_files

        folder = Path(model.removeprefix("hf:"))
        digest.add("model-name", folder.resolve().name)
        digest.add("hf-config", file_digest(check_folder(folder)))
        for file in weight_files(folder):
            digest.add("hf-weights-name", file.name)
            digest.add("hf-weights-bytes", file_digest(file))
    else:
        digest.add("model-name", model)
    digest.add("builders", "\n".join(f"{name}={distribution_version(name)}" for name in SOURCE_BUILDERS[kind]))
    digest.add("source-options", options_fingerprint(source_options))
    digest.add("options", options_fingerprint(options))
    digest.add("toolchain", toolchain_fingerprint())
    _add_backend_extras(digest, options)
    return digest.hexdigest()


def _add_backend_extras(digest: Digest, options: LowerOptions) -> None:
    from lowerkit.cli.targets import backend_of

    for tag, text in backend_of(options.target).cache_key_extras(options.target).items():
        digest.add(tag, text)


def options_fingerprint(options: LowerOptions | SourceOptions) -> str:
    """Every field of `options` (and of a dataclass in one: a backend's settings), by name, as text
    (input paths by content, output locations by whether they are asked for); a field of unknown
    type fails."""
    return "\n".join(
        f"{field.name}={_encode(_requested(field, getattr(options, field.name)))}"
        for field in dataclasses.fields(options)
    )


def _requested(field: dataclasses.Field[Any], value: Any) -> Any:
    """An output location's value in the key: whether it is asked for (see `options.OUTPUT`)."""
    return value is not None if field.metadata.get("output") else value


def _encode(value: Any) -> str:
    if value is None or isinstance(value, bool | int | float | str):
        return f"{type(value).__name__}:{value!r}"
    if isinstance(value, enum.Enum):
        return f"enum:{type(value).__name__}.{value.name}"
    if isinstance(value, Path):
        return f"path:{path_digest(value)}"
    if isinstance(value, tuple | list):
        return "[" + ",".join(_encode(item) for item in value) + "]"
    if isinstance(value, dict):
        return "{" + ",".join(f"{_encode(k)}:{_encode(v)}" for k, v in sorted(value.items(), key=repr)) + "}"
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        inner = ",".join(f"{f.name}={_encode(_requested(f, getattr(value, f.name)))}" for f in dataclasses.fields(value))
        return f"{type(value).__name__}({inner})"
    raise TypeError(
        f"the lowering cache key cannot encode a {type(value).__name__} option value; "
        "teach lowerkit.cli.cache.key._encode that type"
    )


def program_fingerprint(program: torch.export.ExportedProgram) -> str:
    """SHA-256 of an exported program's graph, signature, range constraints, weights and constants."""
    digest = Digest()
    digest.add("graph", _ADDRESS.sub("", str(program.graph)))
    for node in program.graph.nodes:
        value = node.meta.get("val")
        digest.add("node", f"{node.name}:{_value_spec(value)}")
    digest.add("signature", _ADDRESS.sub("", str(program.graph_signature)))
    digest.add("ranges", repr(sorted((str(k), str(v)) for k, v in program.range_constraints.items())))
    for kind, tensors in (("state", program.state_dict), ("constant", program.constants)):
        for name in sorted(tensors):
            tensor = tensors[name]
            digest.add(f"{kind}-name", name)
            digest.add(f"{kind}-value", _tensor_bytes(tensor) if _is_tensor(tensor) else _ADDRESS.sub("", repr(tensor)))
    return digest.hexdigest()


def toolchain_fingerprint() -> str:
    """The versions of the toolchain and of lowerkit's packages (every registered backend's: a key
    changes with any backend's toolchain, as it did before the backends were split), and the
    digest of lowerkit's source."""
    return _toolchain_fingerprint()


@cache
def _toolchain_fingerprint() -> str:
    from lowerkit.cli.targets import BACKENDS

    backends = BACKENDS.values()
    lines = [f"python={sys.version_info.major}.{sys.version_info.minor}", f"machine={machine_fingerprint()}"]
    lines += [f"{name}={distribution_version(name)}" for name in (*TOOLCHAIN, *(n for b in backends for n in b.toolchain))]
    for distribution, package in (*LOWERKIT_PACKAGES, *(p for b in backends for p in b.lowerkit_packages)):
        lines.append(f"{distribution}={distribution_version(distribution)}")
        lines.append(f"lowerkit.{package} source={_source_digest(package)}")
    return "\n".join(lines)


def machine_fingerprint() -> str:
    """The machine's kind of CPU kernels: architecture, ATEN_CPU_CAPABILITY and the vector ISA flags."""
    flags: set[str] = set()
    with contextlib.suppress(OSError):
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith(("flags", "Features")):
                flags = set(line.partition(":")[2].split()) & VECTOR_FLAGS
                break
    capability = os.environ.get("ATEN_CPU_CAPABILITY", "")
    return f"{platform.machine()} capability={capability or 'auto'} flags={','.join(sorted(flags))}"


def distribution_version(name: str) -> str:
    """The installed version of distribution `name`, or 'absent'."""
    try:
        return importlib.metadata.version(name)
    except importlib.metadata.PackageNotFoundError:
        return "absent"


def _source_digest(package: str) -> str:
    """The package's .py files, by relative name and content, whatever the order or repetition of
    the import path's entries (a Pants sandbox and its subprocesses list the roots differently)."""
    import lowerkit  # pants: no-infer-dep (the namespace package: every lowerkit source root)

    files: set[tuple[str, str]] = set()
    for root in lowerkit.__path__:
        folder = Path(root) / package
        for item in folder.rglob("*.py") if folder.is_dir() else ():
            files.add((item.relative_to(folder).as_posix(), hashlib.sha256(item.read_bytes()).hexdigest()))
    digest = Digest()
    for name, content in sorted(files):
        digest.add("name", name)
        digest.add("bytes", content)
    return digest.hexdigest()


def _tensors_fingerprint(tensors: Iterable[Any], *, values: bool) -> str:
    digest = Digest()
    for tensor in tensors:
        digest.add("spec", _value_spec(tensor))
        if values and _is_tensor(tensor):
            digest.add("bytes", _tensor_bytes(tensor))
    return digest.hexdigest()


def _is_tensor(value: Any) -> bool:
    import torch

    return isinstance(value, torch.Tensor)


def _value_spec(value: Any) -> str:
    if _is_tensor(value):
        return f"{value.dtype}{tuple(value.shape)}"
    if isinstance(value, list | tuple):
        return "[" + ",".join(_value_spec(v) for v in value) + "]"
    return type(value).__name__ if value is not None else "-"


def _tensor_bytes(tensor: torch.Tensor) -> bytes:
    import torch

    flat = tensor.detach().cpu().contiguous().reshape(-1)
    prefix = f"{flat.dtype}{tuple(tensor.shape)}".encode()
    if flat.numel() == 0:
        return prefix
    return prefix + flat.view(torch.uint8).numpy().tobytes()
