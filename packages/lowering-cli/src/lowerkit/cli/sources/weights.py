"""`--weights FILE`: a safetensors file or a torch.load-able state_dict, loaded strictly."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from lowerkit.cli.errors import UsageError

if TYPE_CHECKING:
    import torch

#: Keys named in a mismatch error before "... and N more".
_SHOWN = 5


def read_state_dict(path: Path) -> dict[str, torch.Tensor]:
    """The tensors of `path` (safetensors by content, else torch.load with weights_only=True)."""
    import torch

    if not path.is_file():
        raise UsageError(f"weights file '{path}' does not exist")
    with path.open("rb") as handle:
        head = handle.read(8)
    if path.suffix == ".safetensors" or not head.startswith((b"PK", b"\x80")):  # zip or pickle: torch.save
        return read_safetensors(path)
    try:
        loaded = torch.load(path, map_location="cpu", weights_only=True)
    except Exception as error:
        raise UsageError(
            f"'{path}' is neither a safetensors file nor a state_dict torch.load(weights_only=True) can read "
            f"({type(error).__name__}: {_first_line(error)})"
        ) from None
    if isinstance(loaded, dict) and "state_dict" in loaded and isinstance(loaded["state_dict"], dict):
        loaded = loaded["state_dict"]
    if not isinstance(loaded, dict) or not all(isinstance(v, torch.Tensor) for v in loaded.values()):
        raise UsageError(f"'{path}' holds a {type(loaded).__name__}, not a state_dict (names -> tensors)")
    return {str(k): v for k, v in loaded.items()}


def read_safetensors(path: Path) -> dict[str, torch.Tensor]:
    """Every tensor of a safetensors file; a UsageError for a corrupt or truncated one."""
    from safetensors.torch import load_file

    try:
        return load_file(str(path), device="cpu")
    except Exception as error:  # safetensors raises SafetensorError, OSError, ValueError...
        raise UsageError(f"'{path}' is not a readable safetensors file ({type(error).__name__}: {_first_line(error)})") from None


def check_safetensors(path: Path) -> None:
    """Read `path`'s header and check every tensor's bytes are there (without loading them)."""
    from safetensors import safe_open

    try:
        with safe_open(str(path), framework="pt") as handle:
            for name in handle.keys():
                handle.get_slice(name)
    except Exception as error:
        raise UsageError(f"'{path}' is not a readable safetensors file ({type(error).__name__}: {_first_line(error)})") from None


def load_into(module: torch.nn.Module, path: Path, *, model: str) -> None:
    """Load `path` into `module` strictly: a UsageError names missing and unexpected keys.

    A key missing from the file is fine when a tied parameter (the same tensor under another
    name, e.g. a language model's head tied to its embeddings) is in it.
    """
    state = read_state_dict(path)
    expected = module.state_dict(keep_vars=True)
    groups: dict[int, set[str]] = {}
    for name, tensor in expected.items():
        groups.setdefault(id(tensor), set()).add(name)
    missing = sorted(
        name for name, tensor in expected.items() if name not in state and not groups[id(tensor)] & state.keys()
    )
    unexpected = sorted(set(state) - set(expected))
    if missing or unexpected:
        parts = []
        if missing:
            parts.append(f"missing {_names(missing)}")
        if unexpected:
            parts.append(f"unexpected {_names(unexpected)}")
        raise UsageError(f"weights '{path}' do not fit {model}: {'; '.join(parts)}")
    wrong = [
        f"{name} {tuple(state[name].shape)} (model {tuple(expected[name].shape)})"
        for name in sorted(state)
        if tuple(state[name].shape) != tuple(expected[name].shape)
    ]
    if wrong:
        raise UsageError(f"weights '{path}' do not fit {model}: other shapes for {_names(wrong)}")
    module.load_state_dict({k: v for k, v in state.items()}, strict=False)


def _names(names: list[str]) -> str:
    shown = ", ".join(names[:_SHOWN])
    return f"{len(names)} key(s): {shown}" + (f" ... and {len(names) - _SHOWN} more" if len(names) > _SHOWN else "")


def _first_line(error: BaseException) -> str:
    text = str(error).strip()
    return text.splitlines()[0] if text else "no detail"
