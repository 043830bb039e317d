"""`lowerkit inspect` beyond .pte files: bundled programs (.bpte), ETRecords and lowerkit reports.

The kind is read from the bytes, not the name: a .pte has the flatbuffer identifier "ET..",
a bundled program "BP..", an ETRecord is a zip archive holding `ETRECORD_V0`, a report is JSON.
"""

from __future__ import annotations

import io
import json
import zipfile
from pathlib import Path
from typing import Any

from lowerkit.cli.errors import UsageError


def kind_of(path: Path) -> str:
    """"pte", "bpte", "etrecord" or "report" (unknown bytes: "pte", whose reader explains)."""
    if not path.is_file():
        raise UsageError(f"'{path}' does not exist")
    with path.open("rb") as file:
        head = file.read(8)
    if head[4:6] == b"ET":
        return "pte"
    if head[4:6] == b"BP":
        return "bpte"
    if head.startswith(b"PK\x03\x04"):
        return "etrecord"
    if head.lstrip().startswith(b"{"):
        return "report"
    if path.suffix in (".bpte", ".etrecord", ".json"):
        raise UsageError(f"'{path}' is not a {path.suffix} file lowerkit reads (damaged or of another kind)")
    return "pte"  # the .pte reader says what is wrong with it


def bundle_summary(path: Path) -> dict[str, Any]:
    """The test cases of a bundled program (input and reference-output shapes) and its program's bytes."""
    from executorch.devtools.bundled_program.serialize import (
        deserialize_from_flatbuffer_to_bundled_program,
    )

    try:
        bundle = deserialize_from_flatbuffer_to_bundled_program(path.read_bytes())
    except Exception as error:  # the flatbuffer reader raises many types for damaged input
        raise UsageError(f"'{path}' is a damaged bundled program ({type(error).__name__})") from None
    suites = []
    for suite in bundle.method_test_suites:
        cases = [
            {
                "inputs": [_shape(v) for v in case.inputs],
                "expected_outputs": [_shape(v) for v in case.expected_outputs],
            }
            for case in suite.test_cases
        ]
        suites.append({"method": suite.method_name, "test_cases": cases})
    return {"program": bytes(bundle.program), "suites": suites}


def _shape(value: Any) -> str:
    tensor = getattr(value, "val", value)
    sizes = getattr(tensor, "sizes", None)
    dtype = getattr(tensor, "scalar_type", None)
    if sizes is None:
        return type(tensor).__name__
    return f"{getattr(dtype, 'name', dtype)}{list(sizes)}"


def etrecord_summary(path: Path) -> dict[str, Any]:
    """The records an ETRecord holds (its zip members), checked for ExecuTorch's identifier."""
    try:
        with zipfile.ZipFile(io.BytesIO(path.read_bytes())) as archive:
            names = archive.namelist()
    except zipfile.BadZipFile:
        raise UsageError(f"'{path}' is a damaged ETRecord (not a zip archive)") from None
    if "ETRECORD_V0" not in names:
        raise UsageError(f"'{path}' is a zip archive but not an ETRecord (no ETRECORD_V0 entry)")
    return {
        "records": [n for n in names if n != "ETRECORD_V0"],
        "has_edge_program": any(n.startswith("edge_dialect_exported_program") for n in names),
        "has_debug_handle_map": "debug_handle_map" in names,
        "has_delegate_map": "delegate_map" in names,
    }


def report(path: Path) -> dict[str, Any]:
    """A report written by `lowerkit lower --report`."""
    try:
        data = json.loads(path.read_text())
    except (UnicodeDecodeError, json.JSONDecodeError) as error:
        raise UsageError(f"'{path}' is not a lowerkit report (bad JSON: {error})") from None
    if not isinstance(data, dict) or "pte_bytes" not in data:
        raise UsageError(f"'{path}' is JSON but not a lowerkit report (written by 'lowerkit lower --report')")
    return data
