"""A cache entry: a JSON summary and named blobs, in one self-verifying byte string (never pickled).

Layout: the hex SHA-256 of the body, a newline, then the body: one line of JSON (format, key,
summary, and each blob's name, size and SHA-256) followed by the blobs' bytes in that order.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass, field
from typing import Any

FORMAT = 1


class CorruptEntry(ValueError):
    """The bytes are not an entry, or do not match their digests."""


@dataclass
class Entry:
    """What a lowering left: its summary (JSON-able) and its files (the .pte, TOSA flatbuffers...)."""

    key: str
    summary: dict[str, Any]
    blobs: dict[str, bytes] = field(default_factory=dict)

    def encode(self) -> bytes:
        """The entry as bytes, deterministic for the same content."""
        names = sorted(self.blobs)
        header = {
            "format": FORMAT,
            "key": self.key,
            "summary": self.summary,
            "blobs": [
                {"name": name, "size": len(self.blobs[name]), "sha256": hashlib.sha256(self.blobs[name]).hexdigest()}
                for name in names
            ],
        }
        body = json.dumps(header, sort_keys=True, separators=(",", ":")).encode() + b"\n"
        body += b"".join(self.blobs[name] for name in names)
        return hashlib.sha256(body).hexdigest().encode() + b"\n" + body

    @classmethod
    def decode(cls, data: bytes, *, key: str) -> Entry:
        """Parse and verify `data` as the entry for `key`; CorruptEntry when anything does not match."""
        digest, newline, body = data.partition(b"\n")
        if not newline or hashlib.sha256(body).hexdigest().encode() != digest:
            raise CorruptEntry("the entry does not match its digest")
        line, newline, payload = body.partition(b"\n")
        try:
            header = json.loads(line)
        except ValueError as error:
            raise CorruptEntry(f"the entry header is not JSON ({error})") from None
        if not newline or header.get("format") != FORMAT or header.get("key") != key:
            raise CorruptEntry("the entry is for another key or format")
        try:
            blobs = _blobs(header["blobs"], payload)
            summary = dict(header["summary"])
        except (KeyError, TypeError, ValueError) as error:
            raise CorruptEntry(f"the entry header is malformed ({type(error).__name__})") from None
        return cls(key=key, summary=summary, blobs=blobs)


def _blobs(listed: list[dict[str, Any]], payload: bytes) -> dict[str, bytes]:
    blobs: dict[str, bytes] = {}
    offset = 0
    for blob in listed:
        data = payload[offset : offset + blob["size"]]
        offset += blob["size"]
        if len(data) != blob["size"] or hashlib.sha256(data).hexdigest() != blob["sha256"]:
            raise CorruptEntry(f"blob '{blob['name']}' does not match its digest")
        blobs[str(blob["name"])] = data
    if offset != len(payload):
        raise CorruptEntry("the entry has trailing bytes")
    return blobs
