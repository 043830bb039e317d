"""`python -m lowerkit.cli`."""

from lowerkit.cli.entry import run

if __name__ == "__main__":
    run()
