"""`lowerkit build FLEET.toml`: checked before anything runs, failures isolated, every lowering cached."""

from __future__ import annotations

import json
import textwrap

import pytest

from lowerkit.cli.errors import UsageError
from lowerkit.cli.fleet import spec

GOOD = """\
[defaults]
verify = false

[[lower]]
model = "zoo:conv_linear"
targets = ["coreml", "tosa-fp"]

[[lower]]
model = "zoo:ds_cnn"
targets = ["tosa-int"]
"""


@pytest.mark.parametrize(
    ("text", "line", "says"),
    [
        (GOOD.replace('targets = ["tosa-int"]', 'targets = ["tosa-itn"]'), 10, "unknown target 'tosa-itn'"),
        (GOOD.replace('model = "zoo:ds_cnn"', 'model = "zoo:ds_cnm"'), 9, "unknown zoo model 'zoo:ds_cnm'"),
        (GOOD.replace("verify = false", "verfiy = false"), 2, "unknown key 'verfiy'"),
        (GOOD.replace('targets = ["coreml", "tosa-fp"]', 'targets = "coreml"'), 6, "'targets' must be a list"),
        (GOOD.replace("verify = false", "verify = flase"), 2, "not valid TOML"),
        (GOOD.replace('targets = ["tosa-int"]', 'targets = ["tosa-int"'), 10, "not valid TOML"),
        (GOOD.replace('model = "zoo:ds_cnn"', 'model = "zoo:conv_linear"').replace('["tosa-int"]', '["coreml"]'), 10, "already built by the [[lower]] at line 4"),
        (GOOD.replace('targets = ["tosa-int"]\n', ""), 8, "has no 'targets'"),
        (GOOD + 'coreml_passes = ["common::dead_code_elimination"]\n', 11, "coreml_passes applies to Core ML targets"),
    ],
    ids=["target", "zoo-model", "key", "type", "syntax", "unclosed", "duplicate", "missing", "passes"],
)
def test_a_bad_fleet_file_is_one_line_naming_the_line_and_nothing_is_written(lowerkit, tmp_path, text, line, says):
    fleet = tmp_path / "FLEET.toml"
    fleet.write_text(text)
    out = tmp_path / "out"
    outcome = lowerkit("build", str(fleet), "-o", str(out), "-q")
    assert outcome.code == 2, outcome.err
    message = outcome.err.strip()
    assert len(message.splitlines()) == 1, message
    assert says in message, message
    assert f"FLEET.toml:{line}" in message or f"line {line}" in message, message
    assert not out.exists(), "a bad fleet file must not write anything"


def test_shards_split_the_fleet_without_overlap(tmp_path):
    fleet = tmp_path / "FLEET.toml"
    fleet.write_text(GOOD + '\n[[lower]]\nmodel = "zoo:resnet8"\ntargets = ["coreml", "tosa-int", "tosa-fp"]\n')
    jobs = spec.load(fleet)
    assert [(j.model, j.target) for j in jobs][:3] == [("zoo:conv_linear", "coreml"), ("zoo:conv_linear", "tosa-fp"), ("zoo:ds_cnn", "tosa-int")]
    shards = [spec.shard(jobs, f"{i}/3") for i in (1, 2, 3)]
    assert sorted(j.index for s in shards for j in s) == list(range(len(jobs)))
    assert all(len(s) == 2 for s in shards)
    for bad in ("0/3", "4/3", "1-3", "x"):
        with pytest.raises(UsageError, match="must be I/N"):
            spec.shard(jobs, bad)


def test_a_failing_model_does_not_stop_the_others_and_is_named(lowerkit, tmp_path, monkeypatch):
    fleet = tmp_path / "FLEET.toml"
    fleet.write_text(
        textwrap.dedent(
            """\
            [[lower]]
            model = "zoo:conv_linear"
            targets = ["coreml", "tosa-fp"]
            [[lower]]
            model = "no_such_package.models:build"
            targets = ["tosa-int"]
            """
        )
    )
    out = tmp_path / "out"
    first = lowerkit("build", str(fleet), "-o", str(out), "--json", "-q")
    assert first.code == 1
    rows = json.loads(first.out)["jobs"]
    assert [(r["target"], r["cache"]) for r in rows] == [("coreml", "miss"), ("tosa-fp", "miss"), ("tosa-int", "-")]
    assert "cannot import 'no_such_package.models'" in rows[2]["error"]
    assert "1 of 3 lowerings failed: no_such_package.models:build -> tosa-int" in first.err
    assert sorted(p.name for p in out.iterdir()) == ["conv_linear.coreml.pte", "conv_linear.tosa-fp.pte"]
    assert all(r["bytes"] == (out / r["output"].split("/")[-1]).stat().st_size for r in rows[:2])
    pte = (out / "conv_linear.coreml.pte").read_bytes()

    # Again with two worker processes: every lowering comes from the cache, same bytes.
    second = lowerkit("build", str(fleet), "-o", str(out), "-j", "2", "-q")
    assert second.code == 1
    assert "2 from the cache" in second.out, second.out
    assert "FAILED: cannot import 'no_such_package.models'" in second.out
    assert (out / "conv_linear.coreml.pte").read_bytes() == pte

    # Another cache folder is another cache, in the same process too.
    monkeypatch.setenv("LOWERKIT_CACHE_DIR", str(tmp_path / "other-cache"))
    third = lowerkit("build", str(fleet), "-o", str(out), "--json", "-q")
    assert [r["cache"] for r in json.loads(third.out)["jobs"]] == ["miss", "miss", "-"]


def test_list_prints_the_shards_jobs_without_lowering(lowerkit, tmp_path):
    fleet = tmp_path / "FLEET.toml"
    fleet.write_text(GOOD)
    outcome = lowerkit("build", str(fleet), "-o", str(tmp_path / "out"), "--shard", "2/2", "--list")
    assert outcome.code == 0, outcome.err
    assert outcome.out.split() == ["zoo:conv_linear", "tosa-fp", "conv_linear.tosa-fp.pte"]
    assert not (tmp_path / "out").exists()
