"""Timed steps: each is recorded, and shown with a spinner on a terminal unless --quiet."""

from __future__ import annotations

import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from rich.console import Console


class Steps:
    """Times named steps; shows a spinner for each while it runs when `show` is true."""

    def __init__(self, *, show: bool, console: Console | None = None) -> None:
        self.seconds: dict[str, float] = {}
        if console is None and show:  # rich only when something is shown (a cache hit stays light)
            from rich.console import Console

            console = Console(stderr=True)
        self._console = console
        self._show = show and console is not None and console.is_terminal

    @classmethod
    def for_terminal(cls, *, quiet: bool) -> Steps:
        """Steps shown on stderr when it is a terminal and `quiet` is false."""
        return cls(show=not quiet and sys.stderr.isatty())

    @contextmanager
    def step(self, name: str) -> Iterator[None]:
        """Run the body as step `name`, adding its wall time to `seconds[name]`."""
        start = time.perf_counter()
        try:
            if self._show and self._console is not None:
                with self._console.status(f"{name}..."):
                    yield
            else:
                yield
        finally:
            elapsed = time.perf_counter() - start
            self.seconds[name] = self.seconds.get(name, 0.0) + elapsed
            if self._show and self._console is not None and elapsed >= 1.0:
                self._console.print(f"[green]✓[/] {name} ({elapsed:.1f} s)")

