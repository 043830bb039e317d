"""The cache's command-line surface: the options `lower` and `build` share, and `lowerkit cache`."""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any, TypeVar

import click

from lowerkit.cli.errors import UsageError

if TYPE_CHECKING:
    from lowerkit.cli.cache.cached import CacheSettings

F = TypeVar("F", bound=Callable[..., Any])


def cache_options(command: F) -> F:
    """Add --no-cache, --cache-remote and --cache-remote-read-only to a command."""
    for option in reversed(
        (
            click.option("--no-cache", is_flag=True, help="Neither read nor write the lowering cache."),
            click.option(
                "--cache-remote",
                envvar="LOWERKIT_CACHE_REMOTE",
                metavar="grpc://HOST:PORT",
                help="Also use this REAPI server's cache (BuildGrid, Buildbarn, bazel-remote...).",
            ),
            click.option("--cache-remote-read-only", is_flag=True, help="Read the remote cache, never write it."),
        )
    ):
        command = option(command)
    return command


def settings(*, no_cache: bool, cache_remote: str | None, cache_remote_read_only: bool) -> CacheSettings:
    """The CacheSettings the options describe; a UsageError for a bad remote address."""
    from lowerkit.cli.cache.cached import CacheSettings
    from lowerkit.cli.cache.remote import RemoteStore

    if no_cache:
        return CacheSettings(enabled=False)
    remote = None
    if cache_remote:
        try:
            remote = RemoteStore(cache_remote, read_only=cache_remote_read_only, warn=_warn)
        except ValueError as error:
            raise UsageError(f"{error} (--cache-remote / LOWERKIT_CACHE_REMOTE)") from None
    return CacheSettings(remote=remote)


def _warn(message: str) -> None:
    click.echo(f"warning: {message}", err=True)


@click.group("cache")
def cache_group() -> None:
    """Show or clear the local lowering cache ($LOWERKIT_CACHE_DIR, else $XDG_CACHE_HOME/lowerkit)."""


@cache_group.command("info")
@click.option("--json", "as_json", is_flag=True, help="Print JSON.")
def info_command(as_json: bool) -> None:
    """Where the cache is, how many entries and bytes it holds, and its bound."""
    import json

    from lowerkit.cli.cache.store import LocalStore

    info = LocalStore().info()
    if as_json:
        row = {"directory": str(info.directory), "entries": info.entries, "bytes": info.bytes, "max_bytes": info.max_bytes}
        click.echo(json.dumps(row, indent=2))
        return
    click.echo(f"{info.directory}: {info.entries} entries, {info.bytes:,} bytes (bound {info.max_bytes:,} bytes, LOWERKIT_CACHE_MAX_BYTES)")


@cache_group.command("clear")
def clear_command() -> None:
    """Remove every entry of the local cache."""
    from lowerkit.cli.cache.store import LocalStore

    store = LocalStore()
    click.echo(f"removed {store.clear()} entries from {store.directory}")
