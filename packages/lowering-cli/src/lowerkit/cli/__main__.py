"""`python -m lowerkit.cli`."""

from lowerkit.cli.app import run

if __name__ == "__main__":
    run()
