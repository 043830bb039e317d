"""results.LoweredProgram: the digest, delegation check and atomic save every lowering result shares."""

from __future__ import annotations

import dataclasses
import hashlib
from pathlib import Path

from lowerkit.pass_infra.helpers.results import LoweredProgram


@dataclasses.dataclass(frozen=True)
class Result(LoweredProgram):
    pte: bytes
    cpu_ops: tuple[str, ...] = ()


def test_a_result_answers_from_its_pte_and_cpu_ops() -> None:
    assert [f.name for f in dataclasses.fields(Result)] == ["pte", "cpu_ops"], "the mixin declares no field"
    assert Result(b"abc").pte_sha256 == hashlib.sha256(b"abc").hexdigest()
    assert Result(b"abc").fully_delegated and not Result(b"abc", ("aten::cumsum",)).fully_delegated


def test_save_creates_the_folder_and_replaces_atomically(tmp_path: Path) -> None:
    target = tmp_path / "out" / "model.pte"
    assert Result(b"first").save(target) == target
    assert Result(b"second").save(str(target)) == target
    assert target.read_bytes() == b"second"
    assert sorted(p.name for p in target.parent.iterdir()) == ["model.pte"], "no temporary file left"
