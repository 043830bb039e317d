"""The delegate payload: a directory tree flattened the way ExecuTorch's Core ML runtime reads it.

Format (ExecuTorch ``runtime/inmemoryfs``): file contents back to back at offsets aligned to
``alignment``, then the JSON metadata ``{"nodes": [...]}`` written byte-reversed at the end, so
the runtime reads it from the end of the buffer. Nodes are listed children first, the root last;
a file node is ``{"children": {}, "dataRegion": {"offset", "size"}, "kind": 0, "name"}``, a
directory ``kind`` 1 with ``children`` mapping names to node indices. ExecuTorch's writer walks
directories in hash-map order; this one sorts names, so the same tree gives the same bytes.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

#: Payloads above this size have their files aligned to ``LARGE_ALIGNMENT`` (as ExecuTorch does
#: above 1 GiB so that the runtime can map them); smaller ones are packed.
LARGE_PAYLOAD = 1024 * 1024 * 1024
LARGE_ALIGNMENT = 16384

_FILE = 0
_DIRECTORY = 1

Tree = Mapping[str, "bytes | Tree"]


def _align(value: int, alignment: int) -> int:
    return (value + alignment - 1) // alignment * alignment


def _tree_size(tree: Tree) -> int:
    return sum(len(v) if isinstance(v, bytes) else _tree_size(v) for v in tree.values())


def flatten_tree(root_name: str, tree: Tree, *, alignment: int | None = None) -> bytes:
    """Flatten ``{name: bytes | subtree}`` (rooted at a directory ``root_name``) into a payload."""
    if alignment is None:
        alignment = LARGE_ALIGNMENT if _tree_size(tree) > LARGE_PAYLOAD else 1
    nodes: list[dict[str, object]] = []
    chunks: list[bytes] = []
    position = 0

    def visit(name: str, item: bytes | Tree) -> int:
        nonlocal position
        if isinstance(item, bytes):
            offset = _align(position, alignment)
            chunks.append(b"\0" * (offset - position))
            chunks.append(item)
            position = offset + len(item)
            nodes.append(
                {"children": {}, "dataRegion": {"offset": offset, "size": len(item)},
                 "kind": _FILE, "name": name}
            )
            return len(nodes) - 1
        children = {child: visit(child, item[child]) for child in sorted(item)}
        nodes.append(
            {"children": children, "dataRegion": {"offset": 0, "size": 0},
             "kind": _DIRECTORY, "name": name}
        )
        return len(nodes) - 1

    visit(root_name, tree)
    end = _align(position, alignment)
    chunks.append(b"\0" * (end - position))
    metadata = json.dumps(
        {"nodes": nodes}, sort_keys=True, separators=(",", ":"), ensure_ascii=False
    ).encode("utf-8")
    chunks.append(metadata[::-1])
    return b"".join(chunks)


_FIRST_WINDOW = 64 * 1024


def _read_metadata(payload: bytes) -> dict[str, object]:
    """The JSON metadata written byte-reversed at the payload's end, parsed.

    Reversing the payload's tail gives the metadata in reading order followed by file bytes;
    ``json.JSONDecoder().raw_decode`` parses exactly one object from its start (escapes
    included) and ignores what follows. The tail window grows until the object fits.
    """
    decoder = json.JSONDecoder()
    window = _FIRST_WINDOW
    while True:
        tail = payload[-window:][::-1]
        text = tail.decode("utf-8", errors="surrogateescape")
        try:
            metadata, _ = decoder.raw_decode(text)
        except json.JSONDecodeError as error:
            if window < len(payload):
                window *= 4
                continue
            raise ValueError("not a Core ML delegate payload: no metadata at its end") from error
        if not isinstance(metadata, dict) or "nodes" not in metadata:
            raise ValueError("not a Core ML delegate payload: its end holds no node list")
        return metadata


def unflatten_payload(payload: bytes) -> tuple[str, dict[str, object]]:
    """The root name and ``{name: bytes | subtree}`` of a payload (lowerkit's or ExecuTorch's)."""
    metadata = _read_metadata(payload)
    nodes: Any = metadata["nodes"]

    def build(index: int) -> bytes | dict[str, object]:
        node = nodes[index]
        if node["kind"] == _FILE:
            region = node["dataRegion"]
            return bytes(payload[region["offset"] : region["offset"] + region["size"]])
        return {name: build(child) for name, child in node["children"].items()}

    root = nodes[-1]
    tree = build(len(nodes) - 1)
    assert isinstance(tree, dict)
    return str(root["name"]), tree


def files_of(tree: Mapping[str, object], prefix: str = "") -> dict[str, bytes]:
    """``{"dir/sub/file": bytes}`` for every file of a tree, sorted by path."""
    result: dict[str, bytes] = {}
    for name in sorted(tree):
        item = tree[name]
        path = f"{prefix}{name}"
        if isinstance(item, bytes):
            result[path] = item
        else:
            assert isinstance(item, Mapping)
            result.update(files_of(item, path + "/"))
    return result
