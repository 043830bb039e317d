"""Read the Vela payload an Ethos-U delegate carries in a .pte, with the standard library.

ExecuTorch's `backends/arm/arm_vela.py` packs Vela's output as named blocks: a 16-byte
name, a little-endian uint32 length, an external flag byte, 11 reserved bytes, then the data
padded to 16 bytes; "scratch_size" holds the scratch buffer's size (uint32).
"""

from __future__ import annotations

import struct
from typing import Any

_HEADER = struct.Struct("<16sIB11s")
_MAGIC = b"vela_bin_stream\x00"


def blocks(payload: bytes) -> dict[str, bytes]:
    """The named blocks of a Vela binary stream; ValueError when `payload` is not one."""
    if not payload.startswith(_MAGIC):
        raise ValueError("not a Vela binary stream")
    found: dict[str, bytes] = {}
    at = 0
    while at + _HEADER.size <= len(payload):
        name, length, _external, _reserved = _HEADER.unpack_from(payload, at)
        at += _HEADER.size
        found[name.rstrip(b"\x00").decode()] = payload[at : at + length]
        at += (length + 15) // 16 * 16
    return found


def summary(payload: bytes, compile_specs: dict[str, str]) -> dict[str, Any]:
    """What the .pte says about its Vela compile: sizes of the command stream, weights and scratch, and the flags."""
    found = blocks(payload)
    flags = compile_specs.get("compile_flags", "")
    settings = {}
    for flag in flags.split():
        key, _, value = flag.removeprefix("--").partition("=")
        if key in ("accelerator-config", "system-config", "memory-mode", "config"):
            settings[key] = value
    scratch = struct.unpack("<I", found["scratch_size"])[0] if len(found.get("scratch_size", b"")) == 4 else None
    return {
        "command_stream_bytes": len(found.get("cmd_data", b"")),
        "weight_bytes": len(found.get("weight_data", b"")),
        "scratch_bytes": scratch,
        **settings,
    }
