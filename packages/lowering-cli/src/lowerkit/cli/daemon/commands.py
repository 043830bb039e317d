"""`lowerkit daemon start | stop | status`."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time

import click

from lowerkit.cli.daemon import client, fingerprint
from lowerkit.cli.errors import CliError, UsageError

#: The daemon's module, run as `python -m` (named, not imported: it imports the app, which imports this).
SERVER_MODULE = "lowerkit.cli.daemon.server"
#: Longest `start` waits for the daemon's imports.
_START_TIMEOUT_S = 300.0


@click.group("daemon")
def daemon_group() -> None:
    """A warm process that skips the ~16 s of imports of `lower`, `debug`, `build`, `demo`."""


@daemon_group.command("start")
@click.option("--idle-timeout", type=float, default=1800.0, show_default=True, help="Stop after this many idle seconds.")
def start_command(idle_timeout: float) -> None:
    """Start a daemon for this interpreter and packages (nothing if one already runs)."""
    if not sys.platform.startswith("linux"):
        raise UsageError(
            "lowerkit daemon runs on Linux only (on macOS, forking after Core ML's frameworks are loaded is unsafe); "
            "commands run in-process there"
        )
    running = client.request({"control": "status"})
    if running is not None:
        click.echo(f"lowerkit daemon already running (pid {running['pid']}, {running['served']} commands served)")
        return
    try:
        folder = fingerprint.private_daemon_dir()
    except PermissionError as error:
        raise CliError(str(error)) from None
    lines = fingerprint.parts()
    digest = fingerprint.fingerprint(lines)
    path = fingerprint.socket_path(digest)
    log = folder / f"{path.stem}.log"
    expected = folder / f"{path.stem}.fingerprint.json"  # for the daemon to name what differs
    expected.write_text(json.dumps(lines, indent=0))
    # Absolute: the daemon runs from / so that no folder of the caller's shadows a package.
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(os.path.abspath(p) for p in sys.path if p)}
    started = time.monotonic()
    with open(log, "ab") as log_file:
        process = subprocess.Popen(
            [sys.executable, "-m", SERVER_MODULE, "--socket", str(path),
             "--fingerprint", str(expected), "--idle-timeout", str(idle_timeout)],
            stdin=subprocess.DEVNULL, stdout=log_file, stderr=log_file, env=env, cwd="/", start_new_session=True,
        )  # fmt: skip
    while (status := client.request({"control": "status"})) is None:
        if process.poll() is not None:
            raise CliError(f"the daemon exited with status {process.returncode} before it was ready; see {log}")
        if time.monotonic() - started > _START_TIMEOUT_S:
            process.terminate()
            raise CliError(f"the daemon was not ready after {_START_TIMEOUT_S:.0f} s; see {log}")
        time.sleep(0.2)
    click.echo(
        f"lowerkit daemon ready in {time.monotonic() - started:.1f} s (pid {status['pid']}); "
        f"lower, debug, build and demo now run in it; it stops after {idle_timeout:.0f} s idle or on "
        "'lowerkit daemon stop'"
    )


@daemon_group.command("stop")
@click.option("--all", "every", is_flag=True, help="Also stop daemons of other installs or settings (stale ones).")
def stop_command(every: bool) -> None:
    """Stop this interpreter's daemon (running commands finish)."""
    answer = client.request({"control": "stop"})
    click.echo(f"lowerkit daemon {answer['stopping']} stopping" if answer else "no lowerkit daemon running")
    if every:
        for path in client.other_daemons():
            other = client.request({"control": "stop"}, path=path)
            if other is not None:
                click.echo(f"lowerkit daemon {other['stopping']} ({path.name}) stopping")
            else:
                path.unlink(missing_ok=True)  # its process is gone: a socket file left behind


@daemon_group.command("status")
@click.option("--json", "as_json", is_flag=True, help="Print JSON.")
def status_command(as_json: bool) -> None:
    """Show this interpreter's daemon, if one runs."""
    status = client.request({"control": "status"})
    others = client.other_daemons()
    if as_json:
        click.echo(json.dumps(status, indent=1))
        return
    if others:
        click.echo(
            f"{len(others)} other daemon socket(s) in {others[0].parent} (another install, edited sources or "
            "import-time settings); 'lowerkit daemon stop --all' stops them"
        )
    if status is None:
        click.echo("no lowerkit daemon running for this interpreter and these packages")
    else:
        click.echo(
            f"lowerkit daemon pid {status['pid']}: ready in {status['ready_s']} s, {status['served']} commands "
            f"served, {status['running']} running, stops after {status['idle_timeout_s']:.0f} s idle"
        )
