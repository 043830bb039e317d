"""Bundled programs and ETRecords: reference outputs are the eager / fake-quantized model's, and
ExecuTorch's own readers take the files."""

from __future__ import annotations

import io
import zipfile
from pathlib import Path
from typing import Any

import pytest
import torch

from arm_targets.conftest import MODEL, lowerkit_lowering
from golden.arm import stock_quantized
from lowerkit import zoo
from lowerkit.arm_passes.bundle import bundled_program, etrecord


def _test_inputs() -> list[tuple[torch.Tensor, ...]]:
    entry = zoo.get(MODEL)
    return [entry.example_inputs(), *entry.calibration(2, 11)]


def _read(data: bytes) -> Any:
    from executorch.devtools.bundled_program.serialize import (
        deserialize_from_flatbuffer_to_bundled_program,
    )

    return deserialize_from_flatbuffer_to_bundled_program(data)


def _expected(bundle: Any) -> list[torch.Tensor]:
    out = []
    for case in bundle.method_test_suites[0].test_cases:
        (value,) = case.expected_outputs
        tensor = value.val
        out.append(torch.frombuffer(bytearray(tensor.data), dtype=torch.float32).reshape(list(tensor.sizes)))
    return out


@pytest.mark.parametrize("target", ["ethos-u55-64", "TOSA-1.0+FP"])
def test_bpte_reference_outputs_are_the_eager_or_fake_quantized_outputs(target: str) -> None:
    lowering = lowerkit_lowering(target)
    inputs = _test_inputs()
    data = bundled_program(lowering, inputs)
    bundle = _read(data)
    assert bytes(bundle.program) == lowering.pte
    if target == "TOSA-1.0+FP":
        reference = zoo.get(MODEL).module()  # eager float
    else:
        reference = stock_quantized(MODEL, target)  # stock pt2e flow, same calibration: fake-quantized
    with torch.no_grad():
        wanted = [reference(*batch) for batch in inputs]
    got = _expected(bundle)
    assert len(got) == len(inputs) == len(bundle.method_test_suites[0].test_cases)
    for expected, actual in zip(wanted, got, strict=True):
        assert torch.equal(expected, actual), (expected - actual).abs().max()
    from executorch.extension.pybindings.portable_lib import _load_bundled_program_from_buffer

    assert _load_bundled_program_from_buffer(data) is not None  # ExecuTorch's runtime loader reads it


def test_etrecord_is_deterministic_and_parsed_by_executorch(tmp_path: Path) -> None:
    from executorch.devtools import parse_etrecord

    lowering = lowerkit_lowering("ethos-u55-64")
    data = etrecord(lowering)
    assert data == etrecord(lowering)
    assert "ETRECORD_V0" in zipfile.ZipFile(io.BytesIO(data)).namelist()
    path = tmp_path / "m.etrecord"
    path.write_bytes(data)
    record = parse_etrecord(str(path))
    assert record.edge_dialect_program is not None and record.graph_map is not None
