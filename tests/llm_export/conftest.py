"""The LLM export tests write their params and seeded checkpoints in a temporary folder."""

from __future__ import annotations

from collections.abc import Iterator

import pytest


@pytest.fixture(scope="session", autouse=True)
def llm_folders(tmp_path_factory: pytest.TempPathFactory) -> Iterator[None]:
    """``LOWERKIT_BENCH_LLM`` (see ``bench.llm_flows.model_files``) at a fresh folder, for this process and its children."""
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("LOWERKIT_BENCH_LLM", str(tmp_path_factory.mktemp("llm")))
        yield
