"""Which warm daemon a client may use: a fingerprint of what the daemon would import.

Computed without importing torch or ExecuTorch (a few milliseconds): the interpreter, where the
heavy packages are and when they were installed, every lowerkit source file's size and
modification time, and the environment variables those packages read when imported.
"""

from __future__ import annotations

import hashlib
import importlib.util
import os
import sys
from pathlib import Path

#: Top-level packages whose location and install time decide what the daemon imported, whatever
#: the backend (each adds its `Backend.libraries`).
PACKAGES = ("torch", "torchao", "executorch", "numpy", "click")

#: Environment variables (or prefixes) read at import time by torch, its kernels or lowerkit.
IMPORT_TIME_ENV = ("ATEN_", "OMP_", "MKL_", "KMP_", "OPENBLAS_", "TORCH", "PYTORCH_", "TQDM_", "LOWERKIT_DEBUG", "LD_")


def _package_locations(name: str) -> list[Path]:
    spec = importlib.util.find_spec(name)
    if spec is None:
        return []
    if spec.submodule_search_locations:  # a folder on sys.path twice is one location
        return list(dict.fromkeys(Path(p).resolve() for p in spec.submodule_search_locations))
    return [Path(spec.origin).resolve()] if spec.origin else []


def _stamp(path: Path) -> str:
    try:
        status = path.stat()
    except OSError:
        return f"{path}:missing"
    return f"{path}:{status.st_size}:{status.st_mtime_ns}"


def parts() -> list[str]:
    """What the fingerprint covers, one line each (what `fingerprint()` hashes)."""
    from lowerkit.cli.targets import BACKENDS

    lines = [os.path.realpath(sys.executable), sys.version]
    for name in (*PACKAGES, *(library for backend in BACKENDS.values() for library in backend.libraries)):
        for location in _package_locations(name):
            init = location / "__init__.py" if location.is_dir() else location
            lines.append(f"{name}={_stamp(init)}")
    for location in sorted(_package_locations("lowerkit")):
        lines.extend(_stamp(source) for source in sorted(location.rglob("*.py")))
    lines.extend(f"{key}={os.environ[key]}" for key in sorted(os.environ) if key.startswith(IMPORT_TIME_ENV))
    return lines


def fingerprint(lines: list[str] | None = None) -> str:
    """A hex digest that changes whenever a daemon's imports would differ from this process's."""
    digest = hashlib.sha256()
    for line in parts() if lines is None else lines:
        digest.update(line.encode() + b"\0")
    return digest.hexdigest()


def daemon_dir() -> Path:
    """Where sockets live: $LOWERKIT_DAEMON_DIR, else $XDG_RUNTIME_DIR/lowerkit, else /tmp/lowerkit-UID."""
    given = os.environ.get("LOWERKIT_DAEMON_DIR")
    if given:
        return Path(given)
    runtime = os.environ.get("XDG_RUNTIME_DIR")
    return Path(runtime) / "lowerkit" if runtime else Path(f"/tmp/lowerkit-{os.getuid()}")


def is_private(folder: Path) -> bool:
    """Whether `folder` is owned by this user and writable by no one else."""
    status = folder.stat()
    return status.st_uid == os.getuid() and not status.st_mode & 0o022


def private_daemon_dir() -> Path:
    """`daemon_dir()`, created with mode 0700; refused if another user owns it or can write it."""
    folder = daemon_dir()
    folder.mkdir(mode=0o700, parents=True, exist_ok=True)
    if not is_private(folder):
        status = folder.stat()
        raise PermissionError(
            f"{folder} is not private to this user (owner uid {status.st_uid}, mode {oct(status.st_mode & 0o777)}); "
            "remove it or set LOWERKIT_DAEMON_DIR to a folder of your own"
        )
    return folder


def socket_path(digest: str | None = None) -> Path:
    """The socket of the daemon this process may use (`digest`: a fingerprint already computed)."""
    return daemon_dir() / f"{(digest or fingerprint())[:20]}.sock"
