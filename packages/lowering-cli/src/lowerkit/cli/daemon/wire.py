"""The daemon's messages: length-prefixed JSON over a Unix socket, file descriptors beside them."""

from __future__ import annotations

import json
import socket
import struct
from typing import Any

_LENGTH = struct.Struct("!I")
#: No message is near this; a larger length means the peer is not a lowerkit daemon or client.
MAX_MESSAGE = 1 << 24


class WireError(ConnectionError):
    """The peer closed the connection or sent something that is not a message."""


def send(sock: socket.socket, message: dict[str, Any], fds: list[int] | None = None) -> None:
    """Send `message`, and `fds` (duplicated into the receiver) with its first byte."""
    body = json.dumps(message).encode()
    data = _LENGTH.pack(len(body)) + body
    if fds:
        sent = socket.send_fds(sock, [data], fds)
        data = data[sent:]
    sock.sendall(data)


def _receive_exactly(sock: socket.socket, size: int) -> bytes:
    chunks = bytearray()
    while len(chunks) < size:
        chunk = sock.recv(size - len(chunks))
        if not chunk:
            raise WireError("connection closed")
        chunks += chunk
    return bytes(chunks)


def receive(sock: socket.socket, max_fds: int = 0) -> tuple[dict[str, Any], list[int]]:
    """One message and the file descriptors sent with it."""
    fds: list[int] = []
    if max_fds:
        head, fds, _, _ = socket.recv_fds(sock, _LENGTH.size, max_fds)
        if not head:
            raise WireError("connection closed")
        head += _receive_exactly(sock, _LENGTH.size - len(head))
    else:
        head = _receive_exactly(sock, _LENGTH.size)
    (length,) = _LENGTH.unpack(head)
    if length > MAX_MESSAGE:
        raise WireError(f"message of {length} bytes: not a lowerkit daemon peer")
    try:
        message = json.loads(_receive_exactly(sock, length))
    except ValueError as error:
        raise WireError(f"not a message: {error}") from error
    if not isinstance(message, dict):
        raise WireError("not a message: expected a JSON object")
    return message, fds
