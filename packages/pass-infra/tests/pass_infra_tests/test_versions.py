"""Version guard: on unproven library versions the accelerated paths run stock, loudly."""

from __future__ import annotations

import warnings

import pytest

from lowerkit.pass_infra import (
    PROVEN_ON,
    PassPipeline,
    UnprovenVersionWarning,
    cheaper_replay,
    faketensor_cache,
)
from lowerkit.pass_infra._upstream import fake_state_snapshot, replay_state_snapshot
from lowerkit.pass_infra.accelerations import versions


def test_installed_versions_are_the_proven_ones() -> None:
    assert versions.unproven_differences(PROVEN_ON) == {}, (
        "torch / ExecuTorch differ from PROVEN_ON: re-read pass-infra's _upstream.py, re-run the "
        "sameness tests, then update PROVEN_ON and test_upstream_sources.py"
    )


@pytest.fixture
def bumped(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(
        versions, "installed_versions", lambda names: {n: "999.0" for n in names}
    )
    monkeypatch.delenv(versions.ALLOW_UNPROVEN_ENV, raising=False)
    versions._warned.clear()


@pytest.mark.usefixtures("bumped")
def test_unproven_versions_run_stock_with_a_warning() -> None:
    replay, cache = replay_state_snapshot(), fake_state_snapshot()
    with pytest.warns(UnprovenVersionWarning, match="torch 999.0 \\(proven on 2.13.0\\)"):
        with cheaper_replay(), faketensor_cache():
            assert replay_state_snapshot() == replay
            assert fake_state_snapshot()["is_builtin"] is cache["is_builtin"]


@pytest.mark.usefixtures("bumped")
def test_unproven_versions_can_be_forced(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(versions.ALLOW_UNPROVEN_ENV, "1")
    before = replay_state_snapshot()
    with warnings.catch_warnings(record=True), cheaper_replay():
        assert replay_state_snapshot() != before
    assert replay_state_snapshot() == before
    assert PassPipeline([]).run is not None


@pytest.mark.usefixtures("bumped")
def test_unproven_versions_export_with_torchs_export(monkeypatch: pytest.MonkeyPatch) -> None:
    import torch

    from lowerkit.pass_infra import _upstream, export_deferring_recompiles

    def lazy_switch() -> None:
        raise AssertionError("the lazy-module switch was used on an unproven torch")

    monkeypatch.setattr(_upstream, "lazy_graph_modules", lazy_switch)
    with pytest.warns(UnprovenVersionWarning, match="export_deferring_recompiles"):
        program = export_deferring_recompiles(torch.nn.Linear(3, 2), (torch.randn(1, 3),))
    assert "linear" in program.graph_module.code
