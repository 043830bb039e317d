"""The payload format: readable by ExecuTorch's own in-memory-filesystem reader; deterministic."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from executorch.backends.apple.coreml import executorchcoreml

from lowerkit.coreml_preprocess import files_of, flatten_tree, unflatten_payload

TREE: dict[str, Any] = {
    "metadata.json": b'{"identifier": "x"}',
    "model.mlpackage": {
        "Manifest.json": b"{}\n",
        "Data": {"com.apple.CoreML": {"model.mlmodel": b"\x08\x06" * 50, "weights": {"weight.bin": bytes(range(256)) * 3}}},
    },
    "empty.txt": b"",
}


def _read_dir(root: Path) -> dict[str, bytes]:
    return {p.relative_to(root).as_posix(): p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file()}


def test_round_trip():
    name, tree = unflatten_payload(flatten_tree("lowered_module", TREE))
    assert name == "lowered_module"
    assert files_of(tree) == files_of(TREE)


def test_executorch_reader_reads_it(tmp_path):
    payload = flatten_tree("lowered_module", TREE)
    assert executorchcoreml.unflatten_directory_contents(payload, str(tmp_path))
    assert _read_dir(tmp_path / "lowered_module") == files_of(TREE)


def test_reads_executorch_writer(tmp_path):
    # ExecuTorch's writer memory-maps every file and crashes on an empty one: leave it out.
    files = {p: d for p, d in files_of(TREE).items() if d}
    source = tmp_path / "lowered_module"
    for path, data in files.items():
        (source / path).parent.mkdir(parents=True, exist_ok=True)
        (source / path).write_bytes(data)
    payload = executorchcoreml.flatten_directory_contents(str(source))
    name, tree = unflatten_payload(payload)
    assert name == "lowered_module"
    assert files_of(tree) == files


def test_insertion_order_does_not_matter():
    reordered: dict[str, Any] = dict(reversed(list(TREE.items())))
    assert flatten_tree("root", reordered) == flatten_tree("root", TREE)


def test_alignment_pads_file_offsets():
    payload = flatten_tree("root", {"a": b"1", "b": b"22"}, alignment=8)
    assert payload[:9] == b"1" + b"\0" * 7 + b"2"
    assert files_of(unflatten_payload(payload)[1]) == {"a": b"1", "b": b"22"}


def test_names_with_quotes_and_backslashes_round_trip():
    # JSON escapes these as \" and \\; the metadata is read from the payload's end.
    tree: dict[str, Any] = {'say "hi".txt': b"x" * 5, "dir\\": {'a"': b"", "b\\\\": b"yz"}, "{": b"}"}
    name, read = unflatten_payload(flatten_tree('root "q" \\', tree))
    assert name == 'root "q" \\'
    assert files_of(read) == files_of(tree)
