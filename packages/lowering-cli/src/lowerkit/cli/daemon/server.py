"""The daemon: import the lowering stack once, then fork one child per forwarded command.

    python -m lowerkit.cli.daemon.server --socket PATH --fingerprint PARTS.json [--idle-timeout S]

Started by `lowerkit daemon start`. The parent only imports, accepts and forks: it never runs a
torch op, so no intra-op thread pool is busy when it forks (as with DataLoader workers forked
after `import torch`), and every child starts from the same state. It exits, removing its socket, after `--idle-timeout` seconds without a command, or on
`lowerkit daemon stop` / SIGTERM.
"""

from __future__ import annotations

import argparse
import contextlib
import importlib
import io
import json
import os
import signal
import socket
import sys
import time
from pathlib import Path
from typing import Any

from lowerkit.cli.daemon import fingerprint, wire
from lowerkit.cli.interrupts import redeliver_swallowed_interrupts
from lowerkit.cli.quiet import quiet_libraries
from lowerkit.cli.targets import BACKENDS

#: What the forwarded commands import: the zoo, the CLI's lazy modules and every backend's library.
PRELOAD = (
    "torch",
    "executorch.exir",
    "lowerkit.cli.app",
    "lowerkit.cli.lowering",
    "lowerkit.cli.model_source",
    "lowerkit.cli.progress",
    "lowerkit.cli.cache.cached",
    "lowerkit.cli.fleet.runner",
    "lowerkit.zoo.registry",
    *(module for backend in BACKENDS.values() for module in backend.preload),
)

#: How often the accept loop wakes to reap children and check the idle time.
_TICK_S = 0.5


class Daemon:
    """The accept loop and its bookkeeping."""

    def __init__(self, listener: socket.socket, *, digest: str, idle_timeout: float, started: float) -> None:
        self.listener = listener
        self.digest = digest
        self.idle_timeout = idle_timeout
        self.ready_s = time.monotonic() - started
        self.children: set[int] = set()
        self.served = 0
        self.last_active = time.monotonic()
        self.stopping = False

    def status(self) -> dict[str, Any]:
        """What `lowerkit daemon status` shows."""
        self._reap()
        return {
            "pid": os.getpid(),
            "fingerprint": self.digest,
            "python": sys.executable,
            "ready_s": round(self.ready_s, 2),
            "served": self.served,
            "running": len(self.children),
            "idle_timeout_s": self.idle_timeout,
        }

    def _reap(self) -> None:
        for pid in list(self.children):
            with contextlib.suppress(ChildProcessError):
                done, _ = os.waitpid(pid, os.WNOHANG)
                if not done:
                    continue
            self.children.discard(pid)
            self.last_active = time.monotonic()

    def serve(self) -> None:
        """Accept until stopped or idle for `idle_timeout` seconds with no child running."""
        self.listener.settimeout(_TICK_S)
        while not self.stopping:
            self._reap()
            if not self.children and time.monotonic() - self.last_active > self.idle_timeout:
                break
            try:
                connection, _ = self.listener.accept()
            except TimeoutError:
                continue
            with connection:
                self._handle(connection)
        # Running children finish their commands; the parent does not wait for them.

    def _handle(self, connection: socket.socket) -> None:
        connection.settimeout(10)
        fds: list[int] = []
        try:
            request, fds = wire.receive(connection, max_fds=3)
            control = request.get("control")
            if control == "status":
                wire.send(connection, self.status())
            elif control == "stop":
                self.stopping = True
                wire.send(connection, {"stopping": os.getpid()})
            elif "argv" in request and len(fds) == 3:
                self._fork(connection, request, fds)
            else:
                wire.send(connection, {"error": "not a lowerkit daemon request"})
        except (OSError, wire.WireError) as error:
            print(f"lowerkit daemon: dropped a connection: {error}", file=sys.stderr, flush=True)
        finally:
            for fd in fds:
                with contextlib.suppress(OSError):
                    os.close(fd)

    def _fork(self, connection: socket.socket, request: dict[str, Any], fds: list[int]) -> None:
        pid = os.fork()
        if pid == 0:
            self.listener.close()
            os._exit(run_child(connection, request, fds))
        self.children.add(pid)
        self.served += 1
        self.last_active = time.monotonic()


def _adopt_streams(fds: list[int], encodings: list[str]) -> None:
    """Make the client's stdin / stdout / stderr this process's fds 0-2 and sys.std*."""
    for number, fd in enumerate(fds):
        os.dup2(fd, number)
        os.close(fd)
    sys.stdin = io.TextIOWrapper(open(0, "rb", closefd=False), encoding=encodings[0])
    sys.stdout = io.TextIOWrapper(
        open(1, "wb", closefd=False), encoding=encodings[1], line_buffering=os.isatty(1)
    )
    sys.stderr = io.TextIOWrapper(
        open(2, "wb", closefd=False), encoding=encodings[2], errors="backslashreplace", write_through=True
    )


def run_child(connection: socket.socket, request: dict[str, Any], fds: list[int]) -> int:
    """In the forked child: become the client's command, run it, report its exit status."""
    for number in (signal.SIGINT, signal.SIGTERM, signal.SIGCHLD):
        signal.signal(number, signal.default_int_handler if number == signal.SIGINT else signal.SIG_DFL)
    redeliver_swallowed_interrupts()  # the client's Ctrl-C must stop the command, wherever it lands
    os.setpgid(0, 0)  # the client forwards Ctrl-C to this process group
    _adopt_streams(fds, request.get("encodings") or ["utf-8"] * 3)
    os.chdir(request["cwd"])
    os.umask(int(request["umask"]))
    os.environ.clear()
    os.environ.update(request["env"])
    sys.path[:] = request.get("sys_path") or sys.path  # `package.module:factory` models resolve as in the client
    importlib.invalidate_caches()
    argv = [str(a) for a in request["argv"]]
    sys.argv = ["lowerkit", *argv]
    code = 1
    try:
        wire.send(connection, {"pid": os.getpid()})
        from lowerkit.cli.app import run_app

        run_app(argv)
        code = 0
    except SystemExit as done:
        code = done.code if isinstance(done.code, int) else (0 if done.code is None else 1)
    except BaseException as error:
        import traceback

        traceback.print_exception(error, file=sys.stderr)
    finally:
        with contextlib.suppress(Exception):
            sys.stdout.flush()
        with contextlib.suppress(Exception):
            sys.stderr.flush()
    with contextlib.suppress(OSError, wire.WireError):
        wire.send(connection, {"exit": code})
    return code


def preload() -> None:
    """Import everything a forwarded command would, without running anything (a lazy package
    facade's names too: ``lowerkit.arm_passes`` loads them on first use)."""
    for name in PRELOAD:
        module = importlib.import_module(name)
        for public in getattr(module, "__all__", ()):
            getattr(module, public)


def main(argv: list[str] | None = None) -> int:
    """Import, check the fingerprint, listen, serve."""
    parser = argparse.ArgumentParser(prog="lowerkit-daemon")
    parser.add_argument("--socket", type=Path, required=True)
    parser.add_argument("--fingerprint", type=Path, required=True, help="JSON: the starter's fingerprint.parts()")
    parser.add_argument("--idle-timeout", type=float, default=1800.0)
    args = parser.parse_args(argv)
    started = time.monotonic()
    quiet_libraries()
    lines = fingerprint.parts()  # before the imports, which set variables of their own (KMP_*)
    expected = json.loads(args.fingerprint.read_text())
    args.fingerprint.unlink(missing_ok=True)
    if lines != expected:
        differing = sorted(set(lines) ^ set(expected))
        print(
            "lowerkit daemon: this interpreter would import other packages or settings than the command that "
            f"started it; not serving. Differences (theirs / ours): {differing[:10]}",
            file=sys.stderr,
        )
        return 3
    digest = fingerprint.fingerprint(lines)
    preload()
    args.socket.unlink(missing_ok=True)
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    listener.bind(str(args.socket))
    listener.listen(16)
    daemon = Daemon(listener, digest=digest, idle_timeout=args.idle_timeout, started=started)

    def stop(signum: int, frame: Any) -> None:
        daemon.stopping = True

    signal.signal(signal.SIGTERM, stop)
    signal.signal(signal.SIGINT, stop)
    print(f"lowerkit daemon {os.getpid()} ready in {daemon.ready_s:.1f} s on {args.socket}", file=sys.stderr, flush=True)
    try:
        daemon.serve()
    finally:
        listener.close()
        args.socket.unlink(missing_ok=True)
    print(f"lowerkit daemon {os.getpid()} stopped after {daemon.served} commands", file=sys.stderr, flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
