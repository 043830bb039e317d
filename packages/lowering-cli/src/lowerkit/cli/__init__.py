"""lowerkit's command line: `lowerkit lower`, `targets`, `zoo`, `inspect`, `demo`."""

from lowerkit.cli.app import main, run

__all__ = ["main", "run"]
