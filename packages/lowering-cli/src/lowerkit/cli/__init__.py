"""lowerkit's command line: `lowerkit lower`, `targets`, `zoo`, `inspect`, `demo`."""

from lowerkit.cli.entry import run

__all__ = ["run"]
