"""The client side: hand a command to a running daemon, if one with this fingerprint listens."""

from __future__ import annotations

import contextlib
import os
import signal
import socket
import sys
from pathlib import Path
from typing import Any

from lowerkit.cli.daemon import fingerprint, wire

#: Commands worth forwarding: the ones that import torch. The rest start in well under a second.
FORWARDED_COMMANDS = frozenset({"lower", "debug", "build", "demo"})
#: Longest wait for a daemon to fork the command's worker; past it the command runs in-process.
_HANDSHAKE_S = 30.0


def connect(timeout: float | None = 5.0, path: Path | None = None) -> socket.socket | None:
    """A connection to this process's daemon (or the one at `path`), or None when none listens."""
    if path is None:
        folder = fingerprint.daemon_dir()
        if not folder.is_dir() or not any(folder.glob("*.sock")):
            return None  # the common case costs one stat, not a fingerprint
        if not fingerprint.is_private(folder):
            return None  # a socket others could have placed: never hand it our environment
        path = fingerprint.socket_path()
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    sock.settimeout(timeout)
    try:
        sock.connect(str(path))
    except OSError:
        sock.close()
        return None
    return sock


def request(message: dict[str, Any], path: Path | None = None) -> dict[str, Any] | None:
    """Send a control message (`status`, `stop`) to this process's daemon (or `path`'s); its answer or None."""
    sock = connect(path=path)
    if sock is None:
        return None
    with sock:
        try:
            wire.send(sock, message)
            return wire.receive(sock)[0]
        except (OSError, wire.WireError):
            return None


def other_daemons() -> list[Path]:
    """Sockets in the daemon folder other than this process's (daemons of other installs or settings)."""
    folder = fingerprint.daemon_dir()
    if not folder.is_dir():
        return []
    mine = fingerprint.socket_path()
    return sorted(p for p in folder.glob("*.sock") if p != mine)


def _encodings() -> list[str]:
    return [getattr(stream, "encoding", None) or "utf-8" for stream in (sys.stdin, sys.stdout, sys.stderr)]


def forward_if_running(argv: list[str]) -> int | None:
    """Run `lowerkit ARGV` in the daemon: its exit status, or None to run it in this process.

    None when LOWERKIT_NO_DAEMON is set, the command is not one worth forwarding, no daemon with
    this fingerprint listens, or this process has no stdin / stdout / stderr to hand over.
    """
    if os.environ.get("LOWERKIT_NO_DAEMON") or not argv or argv[0] not in FORWARDED_COMMANDS:
        return None
    sock = connect()
    if sock is None:
        return None
    with sock:
        sock.settimeout(_HANDSHAKE_S)
        try:
            with contextlib.suppress(AttributeError, ValueError, OSError):
                sys.stdout.flush()
                sys.stderr.flush()
            wire.send(
                sock,
                {
                    "argv": argv,
                    "cwd": os.getcwd(),
                    "env": dict(os.environ),
                    "sys_path": list(sys.path),
                    "umask": _current_umask(),
                    "encodings": _encodings(),
                },
                fds=[0, 1, 2],
            )
            started, _ = wire.receive(sock)
        except (OSError, wire.WireError):
            return None  # nothing ran yet: run in this process instead
        if "pid" not in started:
            return None
        sock.settimeout(None)  # a lowering takes as long as it takes
        return _wait_for_exit(sock, int(started["pid"]))


def _current_umask() -> int:
    mask = os.umask(0o022)
    os.umask(mask)
    return mask


def _wait_for_exit(sock: socket.socket, pid: int) -> int:
    """Relay Ctrl-C / SIGTERM to the worker until it reports its exit status."""

    def relay(signum: int, frame: Any) -> None:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(pid, signum)

    previous = {number: signal.signal(number, relay) for number in (signal.SIGINT, signal.SIGTERM)}
    try:
        while True:
            try:
                message, _ = wire.receive(sock)
            except wire.WireError:
                print("lowerkit: error: the daemon's worker ended without an exit status", file=sys.stderr)
                return 1
            if "exit" in message:
                return int(message["exit"])
    finally:
        for number, handler in previous.items():
            signal.signal(number, handler)
