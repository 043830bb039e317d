"""Which source a MODEL argument names, decided from the text alone (imports no torch)."""

from __future__ import annotations

from pathlib import Path

from lowerkit.cli.errors import UsageError

#: The MODEL prefixes of the named sources.
PREFIXES = ("zoo:", "et:", "hf:", "tv:")


def kind_of(spec: str) -> str:
    """zoo, et, hf, tv, pt2 or factory; a UsageError when `spec` is none of them."""
    for prefix in PREFIXES:
        if spec.startswith(prefix):
            return prefix.removesuffix(":")
    if spec.endswith(".pt2") or Path(spec).exists():
        return "pt2"
    if ":" in spec:
        return "factory"
    raise UsageError(
        f"cannot tell what model '{spec}' is: use zoo:NAME, et:NAME, tv:NAME (see 'lowerkit models'), hf:DIR "
        "(a save_pretrained folder), a .pt2 file saved with torch.export.save, or package.module:factory"
    )
