"""The one patch mechanism: reference-counted, thread-safe, per-thread dispatch, exact restore."""

from __future__ import annotations

import threading
from typing import Any

import pytest

from lowerkit.pass_infra import Patch, Replacement, lowering_lock, suspend_all


class Target:
    def method(self) -> str:
        return "stock"

    @staticmethod
    def static() -> str:
        return "stock"


def _ours(self: Any) -> str:
    return "ours"


def _static_ours() -> str:
    return "ours"


def _patch(**kwargs: Any) -> Patch:
    return Patch(
        "test",
        lambda: [
            Replacement(Target, "method", _ours),
            Replacement(Target, "static", staticmethod(_static_ours)),
            Replacement(Target, "added", 1, dispatch=False),
        ],
        **kwargs,
    )


def _state() -> tuple[Any, Any, bool]:
    return vars(Target)["method"], vars(Target)["static"], "added" in vars(Target)


def test_scope_installs_dispatches_and_restores_identity() -> None:
    before = _state()
    patch = _patch()
    assert not patch.installed and _state() == before
    with patch.scope():
        assert Target().method() == "ours" and Target.static() == "ours" and getattr(Target, "added") == 1  # noqa: B009
        with patch.scope():  # reentrant
            assert patch.installed
        assert Target().method() == "ours"
    assert _state() == before and not patch.installed
    assert vars(Target)["method"] is before[0] and vars(Target)["static"] is before[1]


def test_other_threads_get_the_original_while_installed() -> None:
    patch = _patch()
    seen: list[str] = []
    with patch.scope():
        thread = threading.Thread(target=lambda: seen.extend([Target().method(), Target.static()]))
        thread.start()
        thread.join()
        assert Target().method() == "ours"
    assert seen == ["stock", "stock"]


def test_interleaved_threads_first_applies_last_restores() -> None:
    before = _state()
    patch = _patch()
    a_in, b_in, a_out = threading.Event(), threading.Event(), threading.Event()
    results: dict[str, str] = {}

    def a() -> None:
        with patch.scope():
            a_in.set()
            b_in.wait()
            results["a"] = Target().method()
        a_out.set()

    def b() -> None:
        a_in.wait()
        with patch.scope():
            b_in.set()
            a_out.wait()
            results["b_after_a_left"] = Target().method()
            results["installed"] = str(patch.installed)

    threads = [threading.Thread(target=a), threading.Thread(target=b)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert results == {"a": "ours", "b_after_a_left": "ours", "installed": "True"}
    assert _state() == before


def test_options_stack_and_enabled() -> None:
    patch = Patch("opt", lambda: [Replacement(Target, "method", _ours, enabled=bool)])
    with patch.scope(True):
        assert Target().method() == "ours"
        with patch.scope(False):
            assert patch.stack() == (True, False) and Target().method() == "stock"
        assert patch.options() is True
    assert patch.options() is None


def test_failed_install_and_failing_hooks_leave_nothing() -> None:
    before = _state()

    def boom() -> None:
        raise RuntimeError("hook")

    with pytest.raises(RuntimeError, match="hook"), _patch(on_install=[boom]).scope():
        pass
    assert _state() == before
    patch = _patch(on_uninstall=[boom])
    with pytest.raises(RuntimeError, match="hook"), patch.scope():
        pass
    assert _state() == before and not patch.installed
    with pytest.raises(TypeError, match="dispatch"), Patch("bad", [Replacement(Target, "method", 1)]).scope():
        pass


def test_lowering_lock_is_reentrant() -> None:
    with lowering_lock(), lowering_lock():
        pass


def test_suspend_all_runs_the_calling_thread_stock_and_puts_its_scopes_back() -> None:
    patch = _patch()
    seen: list[str] = []

    def in_a_scope_of_its_own() -> None:
        with patch.scope():
            seen.append(Target().method())

    with patch.scope(options="outer"):
        with suspend_all():
            assert Target().method() == "stock" and Target.static() == "stock"
            assert not patch.active() and patch.options() is None
            worker = threading.Thread(target=in_a_scope_of_its_own)  # other threads: unaffected
            worker.start()
            worker.join()
            with patch.scope(options="inner"):  # a scope opened inside works as usual
                assert Target().method() == "ours" and patch.stack() == ("inner",)
            assert Target().method() == "stock" and patch.installed
        assert Target().method() == "ours" and patch.stack() == ("outer",)
    assert seen == ["ours"] and not patch.installed
    assert vars(Target)["method"] is _state()[0]
