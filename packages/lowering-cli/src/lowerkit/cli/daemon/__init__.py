"""A warm `lowerkit` process: the imports a lowering needs, paid once.

`lowerkit daemon start` starts a server that imports torch, ExecuTorch, coremltools and both
lowerkit backends (~16 s here) and then waits on a Unix socket. While it runs, `lower`,
`debug`, `build` and `demo` are handed to it: it forks a child that already has everything
imported, gives the child this terminal's stdin / stdout / stderr, working directory and
environment, and the command's exit status comes back. Each command still runs in a process
of its own (a fresh fork), so nothing one lowering does reaches the next.

The socket's name is a fingerprint of the interpreter, the packages it would import and the
environment variables read at import time; a client whose fingerprint differs (lowerkit
upgraded, another venv, `ATEN_CPU_CAPABILITY` changed) does not find it and runs in-process.
"""

from lowerkit.cli.daemon.client import FORWARDED_COMMANDS, forward_if_running

__all__ = ["FORWARDED_COMMANDS", "forward_if_running"]
