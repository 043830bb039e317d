"""`lowerkit lower` through the lowering cache: miss, hit with the same bytes, off, corrupt entries."""

from __future__ import annotations

import json

from lowerkit.cli.cache.store import LocalStore


def lower(lowerkit, *args):
    outcome = lowerkit("lower", *args, "--json", "-q")
    assert outcome.code == 0, outcome.err
    return json.loads(outcome.out)


def test_a_second_lowering_is_a_hit_with_the_same_bytes_and_outputs(lowerkit, tmp_path, cache_dir):
    first, second = tmp_path / "first", tmp_path / "second"
    runs = []
    for folder in (first, second):
        folder.mkdir()
        runs.append(
            lower(lowerkit, "zoo:ds_cnn", "-t", "tosa-int", "-o", str(folder / "m.pte"), "--tosa-dir", str(folder / "tosa"))
        )
    assert [run["cache"] for run in runs] == ["miss", "hit"]
    assert (first / "m.pte").read_bytes() == (second / "m.pte").read_bytes()
    assert sorted(p.name for p in (second / "tosa").iterdir()) == ["partition0.tosa"]
    assert (first / "tosa" / "partition0.tosa").read_bytes() == (second / "tosa" / "partition0.tosa").read_bytes()
    for field in ("pte_bytes", "tosa_bytes", "passes", "cpu_ops", "warnings", "verification"):
        assert runs[0][field] == runs[1][field], field
    assert set(runs[1]["seconds"]) == {"cache key", "cache lookup"}, "a hit must not lower"
    assert LocalStore(cache_dir).info().entries == 1
    human = lowerkit("lower", "zoo:ds_cnn", "-t", "tosa-int", "-o", str(tmp_path / "h.pte"), "-q")
    assert "(cache hit)" in human.out, human.out


def test_no_cache_neither_reads_nor_writes(lowerkit, tmp_path, cache_dir):
    run = lower(lowerkit, "zoo:conv_linear", "-t", "coreml", "-o", str(tmp_path / "m.pte"), "--no-cache")
    assert run["cache"] == "off"
    assert LocalStore(cache_dir).info().entries == 0


def test_another_option_is_a_miss(lowerkit, tmp_path):
    out = str(tmp_path / "m.pte")
    assert lower(lowerkit, "zoo:conv_linear", "-t", "coreml", "-o", out)["cache"] == "miss"
    assert lower(lowerkit, "zoo:conv_linear", "-t", "coreml-fp32", "-o", out)["cache"] == "miss"
    assert lower(lowerkit, "zoo:conv_linear", "-t", "coreml", "-o", out)["cache"] == "hit"


def test_a_corrupt_entry_is_lowered_again_and_replaced(lowerkit, tmp_path, cache_dir):
    out = tmp_path / "m.pte"
    assert lower(lowerkit, "zoo:conv_linear", "-t", "coreml", "-o", str(out))["cache"] == "miss"
    good = out.read_bytes()
    (path,) = [p for p in (cache_dir / "entries").rglob("*") if p.is_file()]
    data = bytearray(path.read_bytes())
    data[-100] ^= 0xFF  # inside the .pte blob
    path.write_bytes(bytes(data))
    assert lower(lowerkit, "zoo:conv_linear", "-t", "coreml", "-o", str(out))["cache"] == "miss"
    assert out.read_bytes() == good
    assert path.read_bytes() != bytes(data), "the corrupt entry was not replaced"
    assert lower(lowerkit, "zoo:conv_linear", "-t", "coreml", "-o", str(out))["cache"] == "hit"
    assert out.read_bytes() == good


def test_cache_info_and_clear(lowerkit, tmp_path, cache_dir):
    lower(lowerkit, "zoo:conv_linear", "-t", "coreml", "-o", str(tmp_path / "m.pte"))
    info = json.loads(lowerkit("cache", "info", "--json").out)
    assert info["directory"] == str(cache_dir)
    assert info["entries"] == 1 and info["bytes"] > 0
    cleared = lowerkit("cache", "clear")
    assert cleared.code == 0 and "removed 1 entries" in cleared.out
    assert json.loads(lowerkit("cache", "info", "--json").out)["entries"] == 0


def test_a_bad_remote_address_is_a_usage_error(lowerkit, tmp_path):
    outcome = lowerkit("lower", "zoo:conv_linear", "-t", "coreml", "-o", str(tmp_path / "m.pte"), "--cache-remote", "http://x")
    assert outcome.code == 2
    assert "grpc://HOST:PORT" in outcome.err and len(outcome.err.strip().splitlines()) == 1


def test_an_unwritable_cache_never_fails_a_lowering(lowerkit, tmp_path, monkeypatch):
    blocker = tmp_path / "not-a-folder"
    blocker.write_text("")
    monkeypatch.setenv("LOWERKIT_CACHE_DIR", str(blocker))
    run = lower(lowerkit, "zoo:conv_linear", "-t", "coreml", "-o", str(tmp_path / "m.pte"))
    assert run["cache"] == "miss"
    assert any("could not write the lowering cache" in w for w in run["warnings"]), run["warnings"]
    assert (tmp_path / "m.pte").stat().st_size == run["pte_bytes"]


def test_a_zoo_hit_imports_neither_torch_nor_executorch(tmp_path):
    from cli_tests.test_startup import HEAVY, loaded, run_cli

    for expected in ("miss", "hit"):
        out, modules = run_cli(tmp_path, "lower", "zoo:conv_linear", "-t", "tosa-fp", "-o", str(tmp_path / "m.pte"), "--json", "-q")
        assert json.loads(out)["cache"] == expected
    assert loaded(modules, HEAVY) == []
