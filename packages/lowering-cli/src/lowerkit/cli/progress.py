"""Timed steps: each is recorded, and shown with a spinner on a terminal unless --quiet."""

from __future__ import annotations

import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager

from rich.console import Console


class Steps:
    """Times named steps; shows a spinner for each while it runs when `show` is true."""

    def __init__(self, *, show: bool, console: Console | None = None) -> None:
        self.seconds: dict[str, float] = {}
        self._console = console or Console(stderr=True)
        self._show = show and self._console.is_terminal

    @classmethod
    def for_terminal(cls, *, quiet: bool) -> Steps:
        """Steps shown on stderr when it is a terminal and `quiet` is false."""
        return cls(show=not quiet and sys.stderr.isatty())

    @contextmanager
    def step(self, name: str) -> Iterator[None]:
        """Run the body as step `name`, adding its wall time to `seconds[name]`."""
        start = time.perf_counter()
        try:
            if self._show:
                with self._console.status(f"{name}..."):
                    yield
            else:
                yield
        finally:
            elapsed = time.perf_counter() - start
            self.seconds[name] = self.seconds.get(name, 0.0) + elapsed
            if self._show and elapsed >= 1.0:
                self._console.print(f"[green]✓[/] {name} ({elapsed:.1f} s)")

