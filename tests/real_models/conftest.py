"""The real-model tests make their Hugging Face folders (save_pretrained, seed 0) in a temporary folder."""

from __future__ import annotations

from collections.abc import Iterator

import pytest


@pytest.fixture(scope="session", autouse=True)
def hf_folders(tmp_path_factory: pytest.TempPathFactory) -> Iterator[None]:
    """``LOWERKIT_BENCH_HF`` (see ``bench.corpus.hf_root``) at a fresh folder, for this process and its children."""
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("LOWERKIT_BENCH_HF", str(tmp_path_factory.mktemp("hf")))
        yield
