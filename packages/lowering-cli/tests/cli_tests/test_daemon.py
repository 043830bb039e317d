"""`lowerkit daemon`: forwarded commands give the same bytes, exit status and output as in-process.

One daemon serves the module (its start imports the whole stack once); each test drives it
through real `lowerkit` client processes, which must not import torch themselves.
"""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from lowerkit.cli.daemon import client as daemon_client
from lowerkit.cli.daemon import fingerprint, wire

#: `lowerkit ARGS` as the console script runs it (argv None: a real command line).
_LOWERKIT = [sys.executable, "-c", "from lowerkit.cli.entry import run; run()"]

#: A client process: runs the command line argv[2:] like the console script, then writes the
#: names of its loaded modules to argv[1].
_CLIENT = """
import json, sys
path, sys.argv = sys.argv[1], ["lowerkit", *sys.argv[2:]]
try:
    from lowerkit.cli.entry import run
    run()
finally:
    with open(path, "w") as out:
        json.dump(sorted(sys.modules), out)
"""


@pytest.fixture(scope="module")
def daemon_env(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, str]]:
    """The environment of a client that finds the module's daemon (started here, stopped after)."""
    folder = tmp_path_factory.mktemp("daemon")
    env = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join(p for p in sys.path if p),
        "LOWERKIT_DAEMON_DIR": str(folder),
        "LOWERKIT_CACHE_DIR": str(tmp_path_factory.mktemp("cache")),
    }
    env.pop("LOWERKIT_NO_DAEMON", None)
    started = subprocess.run(
        [*_LOWERKIT, "daemon", "start", "--idle-timeout", "600"],
        env=env, capture_output=True, text=True, timeout=600,
    )  # fmt: skip
    assert started.returncode == 0, started.stderr + "".join(p.read_text() for p in folder.glob("*.log"))
    assert "lowerkit daemon ready" in started.stdout
    yield env
    subprocess.run([*_LOWERKIT, "daemon", "stop"], env=env, timeout=60, check=False)


def client(env: dict[str, str], folder: Path, *args: str, **popen: object) -> subprocess.Popen[str]:
    """Start `lowerkit ARGS` as a client process (modules it loaded: folder / modules.json)."""
    return subprocess.Popen(
        [sys.executable, "-c", _CLIENT, str(folder / "modules.json"), *args],
        env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, **popen,  # type: ignore[call-overload]
    )  # fmt: skip


def status(env: dict[str, str]) -> dict[str, Any]:
    done = subprocess.run(
        [*_LOWERKIT, "daemon", "status", "--json"],
        env=env, capture_output=True, text=True, timeout=60, check=True,
    )  # fmt: skip
    answer = json.loads(done.stdout)
    assert answer is not None, "the daemon is not running"
    return answer


@pytest.mark.parametrize("target", ["coreml-fp32", "tosa-int"])
def test_a_forwarded_lowering_writes_the_bytes_of_an_in_process_one(daemon_env, lowerkit, tmp_path, target):
    served = status(daemon_env)["served"]
    forwarded = tmp_path / "forwarded.pte"
    process = client(daemon_env, tmp_path, "lower", "zoo:conv_linear", "-t", target, "-o", str(forwarded), "--no-cache")
    out, err = process.communicate(timeout=600)
    assert process.returncode == 0, err
    assert f"wrote {forwarded}" in out
    assert status(daemon_env)["served"] == served + 1, "the command did not go through the daemon"
    modules = set(json.loads((tmp_path / "modules.json").read_text()))
    assert "torch" not in modules and "executorch" not in modules, "the client imported the stack itself"

    in_process = tmp_path / "in_process.pte"
    outcome = lowerkit("lower", "zoo:conv_linear", "-t", target, "-o", str(in_process), "--no-cache")
    assert outcome.code == 0, outcome.err
    assert forwarded.read_bytes() == in_process.read_bytes()


def test_a_model_module_on_the_clients_path_is_found(daemon_env, tmp_path):
    """`package.module:factory` resolves on the client's sys.path, which the daemon did not have."""
    models = tmp_path / "models"
    models.mkdir()
    (models / "user_model.py").write_text(
        "import torch\n"
        "def build():\n"
        "    return torch.nn.Sequential(torch.nn.Linear(8, 4), torch.nn.ReLU()), (torch.randn(1, 8),)\n"
    )
    env = {**daemon_env, "PYTHONPATH": daemon_env["PYTHONPATH"] + os.pathsep + str(models)}
    output = tmp_path / "user.pte"
    served = status(daemon_env)["served"]
    process = client(env, tmp_path, "lower", "user_model:build", "-t", "tosa-fp", "-o", str(output), "--no-cache")
    _out, err = process.communicate(timeout=300)
    assert process.returncode == 0, err
    assert status(daemon_env)["served"] == served + 1
    assert output.stat().st_size > 0


def test_errors_come_back_with_their_exit_status_and_message(daemon_env, tmp_path):
    output = tmp_path / "never.pte"
    process = client(daemon_env, tmp_path, "lower", "zoo:no_such_model", "-t", "tosa-int", "-o", str(output))
    _out, err = process.communicate(timeout=300)
    assert process.returncode == 2
    assert "lowerkit: error:" in err and "no_such_model" in err
    assert not output.exists()


def test_ctrl_c_reaches_the_worker_and_nothing_is_written(daemon_env, tmp_path):
    output = tmp_path / "interrupted.pte"
    process = client(
        daemon_env, tmp_path, "lower", "zoo:cnn9_layernorm", "-t", "tosa-int", "-o", str(output), "--no-cache"
    )
    time.sleep(4)  # the worker is lowering by now (a whole lowering takes far longer)
    process.send_signal(signal.SIGINT)
    _out, err = process.communicate(timeout=300)
    assert process.returncode == 130, err
    assert "interrupted; no output was written" in err
    assert not output.exists()


def test_a_bad_connection_does_not_stop_the_daemon(daemon_env):
    path = Path(daemon_env["LOWERKIT_DAEMON_DIR"]) / next(
        p.name for p in Path(daemon_env["LOWERKIT_DAEMON_DIR"]).glob("*.sock")
    )
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as sock:
        sock.connect(str(path))
        sock.sendall(b"\xff\xff\xff\xffnot a message")
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as sock:
        sock.connect(str(path))
        wire.send(sock, {"argv": ["lower"]})  # a command without the client's streams
        assert "error" in wire.receive(sock)[0]
    assert status(daemon_env)["pid"]


def test_the_fingerprint_follows_import_time_settings_and_sources(monkeypatch, tmp_path):
    monkeypatch.delenv("ATEN_CPU_CAPABILITY", raising=False)
    base = fingerprint.fingerprint()
    assert fingerprint.fingerprint() == base
    monkeypatch.setenv("ATEN_CPU_CAPABILITY", "default")  # kernels are chosen when torch is imported
    assert fingerprint.fingerprint() != base
    monkeypatch.delenv("ATEN_CPU_CAPABILITY")
    monkeypatch.setenv("LOWERKIT_CACHE_DIR", str(tmp_path))  # read per command: the daemon may serve it
    assert fingerprint.fingerprint() == base
    source = Path(fingerprint.__file__)
    stat = source.stat()
    try:
        os.utime(source, ns=(stat.st_atime_ns, stat.st_mtime_ns + 1_000_000_000))
        assert fingerprint.fingerprint() != base  # lowerkit edited or upgraded: a new daemon is needed
    finally:
        os.utime(source, ns=(stat.st_atime_ns, stat.st_mtime_ns))


def test_a_daemon_folder_others_can_write_is_refused(monkeypatch, tmp_path):
    folder = tmp_path / "shared"
    folder.mkdir()
    folder.chmod(0o777)
    monkeypatch.setenv("LOWERKIT_DAEMON_DIR", str(folder))
    with pytest.raises(PermissionError, match="not private"):
        fingerprint.private_daemon_dir()
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as planted:  # where this client's daemon would be
        planted.bind(str(fingerprint.socket_path()))
        planted.listen(1)
        assert daemon_client.connect() is None  # a client never hands its environment to a socket there
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(p for p in sys.path if p)}
    started = subprocess.run([*_LOWERKIT, "daemon", "start"], env=env, capture_output=True, text=True, timeout=60)
    assert started.returncode == 1
    assert started.stderr.startswith("lowerkit: error:") and "not private" in started.stderr


def test_stop_all_clears_sockets_whose_daemon_is_gone(tmp_path):
    folder = tmp_path / "daemons"
    folder.mkdir(mode=0o700)
    stale = folder / "0123456789abcdef0123.sock"
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as sock:
        sock.bind(str(stale))  # a socket file nobody listens on, as a killed daemon leaves
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(p for p in sys.path if p), "LOWERKIT_DAEMON_DIR": str(folder)}
    shown = subprocess.run(
        [*_LOWERKIT, "daemon", "status"], env=env, capture_output=True, text=True, timeout=60
    )
    assert "1 other daemon socket(s)" in shown.stdout
    stopped = subprocess.run(
        [*_LOWERKIT, "daemon", "stop", "--all"],
        env=env, capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    assert stopped.returncode == 0, stopped.stderr
    assert "no lowerkit daemon running" in stopped.stdout
    assert not stale.exists()
