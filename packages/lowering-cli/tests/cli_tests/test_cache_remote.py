"""The remote lowering cache against a real REAPI server: BuildGrid 0.9.1 (tools/buildgrid).

BuildGrid runs from LOWERKIT_BGD (the `bgd` of `tools/buildgrid/buildgrid.sh install`), or from
tools/buildgrid/.env in a checkout. Without it these tests skip, except under CI=true, where
they fail: CI installs BuildGrid (.ci/run).
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from lowerkit.cli import lowering
from lowerkit.cli.cache import remote as remote_module
from lowerkit.cli.cache.entry import Entry
from lowerkit.cli.cache.remote import RemoteStore


def _bgd() -> Path | None:
    explicit = os.environ.get("LOWERKIT_BGD")
    if explicit:
        return Path(explicit)
    for parent in Path(__file__).resolve().parents:
        candidate = parent / "tools" / "buildgrid" / ".env" / "bin" / "bgd"
        if candidate.is_file():
            return candidate
    return None


CONFIG = """\
server:
  - !channel
    address: "127.0.0.1:{port}"
    insecure-mode: true
instances:
  - name: ""
    storages:
      - !disk-storage &cas
        path: "{cas}"
    caches:
      - !lru-action-cache &ac
        storage: *cas
        max-cached-refs: 1000
        allow-updates: true
    services:
      - !cas
        storage: *cas
      - !bytestream
        storage: *cas
      - !action-cache
        cache: *ac
"""


class Server:
    """A BuildGrid server on a free localhost port, with its own disk CAS."""

    def __init__(self, bgd: Path, folder: Path) -> None:
        with socket.socket() as probe:
            probe.bind(("127.0.0.1", 0))
            self.port = probe.getsockname()[1]
        (folder / "cas").mkdir(parents=True)
        config = folder / "config.yml"
        config.write_text(CONFIG.format(port=self.port, cas=folder / "cas"))
        self.log = folder / "bgd.log"
        with self.log.open("wb") as log:
            env = {k: v for k, v in os.environ.items() if not k.startswith("PYTHON")}  # bgd runs on Python 3.13
            self.process = subprocess.Popen(
                [str(bgd), "server", "start", str(config)], stdout=log, stderr=log, stdin=subprocess.DEVNULL, env=env
            )
        deadline = time.monotonic() + 90
        while time.monotonic() < deadline:
            assert self.process.poll() is None, f"bgd exited: {self.log.read_text()[-2000:]}"
            try:
                socket.create_connection(("127.0.0.1", self.port), timeout=0.5).close()
                return
            except OSError:
                time.sleep(0.2)
        self.kill()
        raise AssertionError(f"bgd did not listen on {self.port}: {self.log.read_text()[-2000:]}")

    @property
    def url(self) -> str:
        return f"grpc://127.0.0.1:{self.port}"

    def kill(self) -> None:
        self.process.kill()
        self.process.wait(timeout=30)


def _start(tmp_path_factory: pytest.TempPathFactory) -> Server:
    bgd = _bgd()
    if bgd is None or not bgd.is_file():
        if os.environ.get("CI"):
            pytest.fail("BuildGrid is not installed: run tools/buildgrid/buildgrid.sh install and set LOWERKIT_BGD")
        pytest.skip("BuildGrid is not installed (tools/buildgrid/buildgrid.sh install)")
    return Server(bgd, tmp_path_factory.mktemp("buildgrid"))


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    started = _start(tmp_path_factory)
    yield started
    started.kill()


def lower(lowerkit, *args: str) -> tuple[dict, str]:
    outcome = lowerkit("lower", *args, "--json", "-q")
    assert outcome.code == 0, outcome.err
    return json.loads(outcome.out), outcome.err


def test_a_second_machine_gets_a_hit_from_the_server(lowerkit, server, tmp_path, monkeypatch):
    outputs = []
    for machine, expected in (("one", "miss"), ("two", "hit")):
        monkeypatch.setenv("LOWERKIT_CACHE_DIR", str(tmp_path / machine / "cache"))
        folder = tmp_path / machine
        folder.mkdir()
        args = ("zoo:ds_cnn", "-t", "tosa-int", "-o", str(folder / "m.pte"), "--tosa-dir", str(folder / "tosa"))
        run, err = lower(lowerkit, *args, "--cache-remote", server.url)
        assert run["cache"] == expected, (machine, err)
        assert "warning" not in err, err
        outputs.append(((folder / "m.pte").read_bytes(), (folder / "tosa" / "partition0.tosa").read_bytes()))
    assert outputs[0] == outputs[1]


def test_a_read_only_client_never_writes(lowerkit, server, tmp_path, monkeypatch):
    out = str(tmp_path / "m.pte")
    for machine, extra, expected in (("a", ("--cache-remote-read-only",), "miss"), ("b", (), "miss"), ("c", (), "hit")):
        monkeypatch.setenv("LOWERKIT_CACHE_DIR", str(tmp_path / machine))
        monkeypatch.setenv("LOWERKIT_CACHE_REMOTE", server.url)
        run, err = lower(lowerkit, "zoo:conv_linear", "-t", "coreml-fp32", "-o", out, *extra)
        assert run["cache"] == expected, (machine, err)


def test_large_entries_go_through_bytestream_and_are_verified(server, monkeypatch):
    monkeypatch.setattr(remote_module, "BATCH_LIMIT", 1024)
    warnings: list[str] = []
    entry = Entry(key="5e" * 32, summary={"model": "big"}, blobs={"pte": os.urandom(3 * 1024 * 1024 + 7)})
    data = entry.encode()
    writer = RemoteStore(server.url, warn=warnings.append)
    assert writer.put(entry.key, data)
    reader = RemoteStore(server.url, warn=warnings.append)
    assert reader.get(entry.key) == data
    assert reader.get("00" * 32) is None
    assert warnings == []


def test_the_server_killed_mid_run_still_lowers_locally_with_one_warning(lowerkit, tmp_path_factory, tmp_path, monkeypatch):
    doomed = _start(tmp_path_factory)
    real_lower = lowering.lower

    def lower_after_killing_the_server(*args, **kwargs):
        doomed.kill()  # after the lookup, before the upload
        return real_lower(*args, **kwargs)

    monkeypatch.setattr(lowering, "lower", lower_after_killing_the_server)
    run, err = lower(lowerkit, "zoo:conv_linear", "-t", "coreml", "-o", str(tmp_path / "m.pte"), "--cache-remote", doomed.url)
    assert run["cache"] == "miss"
    assert (tmp_path / "m.pte").stat().st_size == run["pte_bytes"]
    assert err.count("warning: remote cache") == 1, err
    assert doomed.url in err and "lowering locally" in err

    # The server stays down: the next lowering warns once and is served by the local cache.
    monkeypatch.setattr(lowering, "lower", real_lower)
    run, err = lower(lowerkit, "zoo:conv_linear", "-t", "coreml", "-o", str(tmp_path / "m.pte"), "--cache-remote", doomed.url)
    assert run["cache"] == "hit"
    assert err.count("warning: remote cache") == 0, "a local hit needs no server"
    monkeypatch.setenv("LOWERKIT_CACHE_DIR", str(tmp_path / "fresh"))
    run, err = lower(lowerkit, "zoo:conv_linear", "-t", "coreml", "-o", str(tmp_path / "m.pte"), "--cache-remote", doomed.url)
    assert run["cache"] == "miss"
    assert err.count("warning: remote cache") == 1, err


def test_a_dead_server_warns_once_per_process(monkeypatch: pytest.MonkeyPatch) -> None:
    """One connection attempt, bounded by CONNECT_TIMEOUT, then the remote is off for the process."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    attempts: list[float] = []
    connect = socket.create_connection

    def counted(address: Any, timeout: float, *args: Any, **kwargs: Any) -> Any:
        attempts.append(timeout)
        return connect(address, timeout, *args, **kwargs)

    monkeypatch.setattr(remote_module.socket, "create_connection", counted)
    warnings: list[str] = []
    store = RemoteStore(f"grpc://127.0.0.1:{port}", warn=warnings.append)
    assert store.get("ab" * 32) is None
    assert store.get("cd" * 32) is None
    assert store.put("ab" * 32, b"x") is False
    assert len(warnings) == 1 and "cannot connect" in warnings[0], warnings
    assert attempts == [remote_module.CONNECT_TIMEOUT] and remote_module.CONNECT_TIMEOUT <= 5
