"""lowerkit's Core ML translations against ExecuTorch 1.5.1's, each registration in its own process.

For every case ExecuTorch converts, lowerkit's registration gives the same final MIL program
(text and constant bytes). The cases ExecuTorch cannot convert are listed, and lowerkit converts
them. Whatever the import order of the two, lowerkit's translations are the ones used.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from coreml_compiler_ops import parity_worker

# Run by path in fresh interpreters; imported here so that the worker's imports are this test's
# dependencies (the worker imports lowerkit and ExecuTorch only inside its functions).
WORKER = Path(parity_worker.__file__)

# ExecuTorch 1.5.1 cannot convert these (see the message each one fails with).
EXECUTORCH_FAILURES = {
    "lowerkit_only_codebook_uint1_per_tensor_ios16": "To pack elements into 1-bit",  # packs signed codes
    "lowerkit_only_codebook_uint4_per_tensor_ios16": "To pack elements into 4-bit",
    "lowerkit_only_codebook_uint5_per_tensor_ios18": "KeyError: 'uint5'",  # no uint5 index type
    "lowerkit_only_int8_weight_only_ios18": "got 5 input(s)",  # dequantize_affine with defaulted args
    "lowerkit_only_edge_int8_weight_only_ios18": "got 5 input(s)",
}


def _expected_constexpr(name: str) -> str | None:
    if "codebook" in name:
        return "constexpr_lut_to_dense"
    if "intx" in name:
        return (
            "constexpr_affine_dequantize"
            if name.endswith("ios16")
            else "constexpr_blockwise_shift_scale"
        )
    return None


def _run(mode: str, *extra: str) -> dict[str, Any]:
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(p for p in sys.path if p))
    result = subprocess.run(
        [sys.executable, str(WORKER), mode, *extra],
        capture_output=True,
        text=True,
        env=env,
        timeout=600,
        check=False,
    )
    lines = [line for line in result.stdout.splitlines() if line.startswith("PARITY-JSON ")]
    assert result.returncode == 0 and lines, f"{mode} worker failed:\n{result.stderr[-4000:]}"
    report: dict[str, Any] = json.loads(lines[-1][len("PARITY-JSON ") :])
    return report


@pytest.fixture(scope="module")
def reports() -> dict[str, dict[str, Any]]:
    return {
        "executorch": _run("executorch", "--zoo"),
        "lowerkit": _run("lowerkit", "--zoo"),
        "lowerkit_then_executorch": _run("lowerkit_then_executorch"),
        "executorch_then_lowerkit": _run("executorch_then_lowerkit"),
    }


def test_each_process_had_only_the_registration_it_asked_for(
    reports: dict[str, dict[str, Any]],
) -> None:
    assert reports["executorch"]["setup"] == {
        "lowerkit_imported": False,
        "executorch_translations_imported": True,
    }
    assert reports["lowerkit"]["setup"] == {
        "is_registered": True,
        "displaced_codebook_module": None,
        "lowerkit_imported": True,
        "executorch_translations_imported": False,
    }


def test_same_mil_as_executorch_where_executorch_converts(
    reports: dict[str, dict[str, Any]],
) -> None:
    upstream, ours = reports["executorch"]["cases"], reports["lowerkit"]["cases"]
    assert upstream.keys() == ours.keys()
    compared = [name for name in upstream if name not in EXECUTORCH_FAILURES]
    assert len(compared) == 9
    for name in compared:
        assert not upstream[name].startswith("ERROR"), (name, upstream[name])
        expected = _expected_constexpr(name)
        assert expected is None or expected in upstream[name], name
        assert ours[name] == upstream[name], name


def test_lowerkit_converts_what_executorch_cannot(reports: dict[str, dict[str, Any]]) -> None:
    upstream, ours = reports["executorch"]["cases"], reports["lowerkit"]["cases"]
    for name, message in EXECUTORCH_FAILURES.items():
        assert upstream[name].startswith("ERROR") and message in upstream[name], (
            name,
            upstream[name],
        )
        assert not ours[name].startswith("ERROR"), (name, ours[name])
    for name in (
        "lowerkit_only_int8_weight_only_ios18",
        "lowerkit_only_edge_int8_weight_only_ios18",
    ):
        # Both weights (embedding and linear) stay int8 in the model.
        assert ours[name].count("constexpr_blockwise_shift_scale(") == 2, name
    assert "constexpr_lut_to_dense" in ours["lowerkit_only_codebook_uint4_per_tensor_ios16"]


@pytest.mark.parametrize("mode", ["lowerkit_then_executorch", "executorch_then_lowerkit"])
def test_lowerkit_wins_whatever_the_import_order(
    reports: dict[str, dict[str, Any]], mode: str
) -> None:
    setup = reports[mode]["setup"]
    assert setup["is_registered"] and setup["executorch_translations_imported"]
    assert (
        setup["displaced_codebook_module"] == "executorch.backends.apple.coreml.compiler.torch_ops"
    )
    lowerkit_alone = {
        k: v for k, v in reports["lowerkit"]["cases"].items() if k in reports[mode]["cases"]
    }
    assert reports[mode]["cases"] == lowerkit_alone
