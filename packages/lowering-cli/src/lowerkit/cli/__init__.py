"""lowerkit's command line (`lowerkit --help`): `build`, `cache`, `compare`, `daemon`, `debug`,
`demo`, `inspect`, `lower`, `models`, `targets`, `zoo`."""

from lowerkit.cli.entry import run

__all__ = [
    "run",  # the console entry point: run the lowerkit command with these arguments
]
