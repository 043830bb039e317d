"""The local lowering cache: verified entries, atomic concurrent writes, LRU eviction."""

from __future__ import annotations

import os
import pickle
import subprocess
import sys
from pathlib import Path

import pytest

from lowerkit.cli.cache.entry import CorruptEntry, Entry
from lowerkit.cli.cache.store import LocalStore


def entry(key: str, size: int = 1000, fill: int = 1) -> Entry:
    return Entry(key=key, summary={"model": "m", "warnings": ["w"]}, blobs={"pte": bytes([fill]) * size, "tosa/p0.tosa": b"t"})


def test_an_entry_round_trips_and_is_deterministic(tmp_path):
    store = LocalStore(tmp_path)
    store.put(entry("ab" * 32))
    got = store.get("ab" * 32)
    assert got == entry("ab" * 32)
    assert entry("ab" * 32).encode() == entry("ab" * 32).encode()
    assert store.get("cd" * 32) is None


@pytest.mark.parametrize("where", ["digest", "header", "blob", "truncated"])
def test_a_corrupt_entry_is_never_served_and_is_removed(tmp_path, where):
    store = LocalStore(tmp_path)
    key = "ab" * 32
    store.put(entry(key))
    path = store.path(key)
    data = bytearray(path.read_bytes())
    if where == "digest":
        data[3] ^= 1
    elif where == "header":
        data[data.index(b'"model"') + 2] ^= 1
    elif where == "blob":
        data[-10] ^= 1
    else:
        data = data[:-1]
    path.write_bytes(bytes(data))
    assert store.get(key) is None
    assert not path.exists()


def test_an_entry_for_another_key_is_not_served(tmp_path):
    store = LocalStore(tmp_path)
    store.put_bytes("cd" * 32, entry("ab" * 32).encode())
    assert store.get("cd" * 32) is None


def test_a_pickle_is_not_an_entry():
    with pytest.raises(CorruptEntry):
        Entry.decode(pickle.dumps({"pte": b"x"}), key="ab" * 32)


def test_least_recently_used_entries_are_evicted_beyond_the_bound(tmp_path):
    size = len(entry("00" * 32).encode())
    store = LocalStore(tmp_path, max_bytes=3 * size)
    keys = [f"{i:02d}" * 32 for i in range(4)]
    for age, key in enumerate(keys[:3]):
        store.put(entry(key))
        os.utime(store.path(key), (1_000_000 + age, 1_000_000 + age))
    assert store.get(keys[0]) is not None  # a hit makes keys[0] the most recently used
    store.put(entry(keys[3]))
    assert store.get(keys[1]) is None, "the least recently used entry was kept"
    assert all(store.get(k) is not None for k in (keys[0], keys[2], keys[3]))
    info = store.info()
    assert (info.entries, info.bytes) == (3, 3 * size)
    assert store.clear() == 3
    assert store.info().entries == 0


def test_an_entry_larger_than_the_bound_is_still_kept_until_the_next_write(tmp_path):
    store = LocalStore(tmp_path, max_bytes=10)
    store.put(entry("ab" * 32))
    assert store.get("ab" * 32) is not None


_WRITER = """
import sys
from pathlib import Path
from lowerkit.cli.cache.entry import Entry
from lowerkit.cli.cache.store import LocalStore
store = LocalStore(Path(sys.argv[1]))
entry = Entry(key="ab" * 32, summary={"n": 1}, blobs={"pte": bytes(range(256)) * 4096})
data = entry.encode()
bad = 0
for _ in range(int(sys.argv[2])):
    store.put_bytes(entry.key, data)
    got = store.get(entry.key)
    bad += got is not None and got != entry
print(bad)
"""


def test_concurrent_writers_of_one_key_both_succeed_and_readers_see_whole_entries(tmp_path):
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(p for p in sys.path if p)}
    writers = [
        subprocess.Popen([sys.executable, "-c", _WRITER, str(tmp_path), "40"], env=env, stdout=subprocess.PIPE, text=True)
        for _ in range(2)
    ]
    outputs = [w.communicate(timeout=120)[0] for w in writers]
    assert [w.returncode for w in writers] == [0, 0]
    assert [o.strip() for o in outputs] == ["0", "0"], "a reader saw a torn or wrong entry"
    store = LocalStore(tmp_path)
    assert store.get("ab" * 32) is not None
    leftovers = [p.name for p in Path(tmp_path).rglob(".*")]
    assert leftovers == [], f"temporary files left behind: {leftovers}"
