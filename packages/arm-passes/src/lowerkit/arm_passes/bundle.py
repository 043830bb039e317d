"""Bundled programs (.bpte) and ETRecords of an Arm lowering, with ExecuTorch's own devtools.

A bundled program holds the ``.pte`` with test cases (inputs and the reference outputs a
board compares against); as in ExecuTorch's ``aot_arm_compiler --bundleio``, the reference
is the program that was lowered run in torch: the fake-quantized one for quantized targets,
the float one otherwise. An ETRecord is what ExecuTorch's Inspector reads next to an ETDump.
"""

from __future__ import annotations

import io
import zipfile
from collections.abc import Sequence
from typing import Any

import torch

from lowerkit.arm_passes import _upstream
from lowerkit.arm_passes.errors import ArmLoweringError

__all__ = ["bundled_program", "etrecord", "reference_outputs"]

#: The timestamp every ETRecord member gets, so the same lowering gives the same bytes.
_ZIP_EPOCH = (1980, 1, 1, 0, 0, 0)


def reference_outputs(lowering: Any, inputs: Sequence[torch.Tensor]) -> list[torch.Tensor]:
    """The lowered program (fake-quantized or float) run in torch on `inputs`: a flat list of tensors."""
    if lowering.source_program is None:
        raise ArmLoweringError("this ArmLowering carries no source program to compute reference outputs")
    with torch.no_grad():
        result = lowering.source_program.module()(*inputs)
    flat, _ = _upstream.pytree.tree_flatten(result)
    return [t.detach().clone() for t in flat]


def bundled_program(lowering: Any, test_inputs: Sequence[Sequence[torch.Tensor]]) -> bytes:
    """The .bpte bytes: the lowering's program with one test case per input tuple and its reference outputs."""
    from executorch.devtools import BundledProgram
    from executorch.devtools.bundled_program.config import MethodTestCase, MethodTestSuite
    from executorch.devtools.bundled_program.serialize import (
        serialize_from_bundled_program_to_flatbuffer,
    )

    if lowering.executorch_manager is None:
        raise ArmLoweringError("this ArmLowering carries no ExecuTorch program to bundle")
    if not test_inputs:
        raise ArmLoweringError("a bundled program needs at least one input tuple")
    cases = [
        MethodTestCase(inputs=list(inputs), expected_outputs=reference_outputs(lowering, inputs))
        for inputs in test_inputs
    ]
    suite = MethodTestSuite(method_name="forward", test_cases=cases)
    return bytes(serialize_from_bundled_program_to_flatbuffer(BundledProgram(lowering.executorch_manager, [suite])))


def etrecord(lowering: Any) -> bytes:
    """The ETRecord bytes of the lowering (edge program, ExecuTorch program, debug handles), deterministic."""
    import copy

    from executorch.devtools import generate_etrecord

    if lowering.edge_manager is None or lowering.executorch_manager is None:
        raise ArmLoweringError("this ArmLowering carries no edge / ExecuTorch program for an ETRecord")
    raw = io.BytesIO()
    generate_etrecord(raw, copy.deepcopy(lowering.edge_manager), lowering.executorch_manager)
    return _fixed_timestamps(raw.getvalue())


def _fixed_timestamps(archive: bytes) -> bytes:
    """The same zip archive with every member dated _ZIP_EPOCH (ETRecord's zip stamps the wall clock)."""
    out = io.BytesIO()
    with zipfile.ZipFile(io.BytesIO(archive)) as source, zipfile.ZipFile(out, "w") as target:
        for member in source.infolist():
            info = zipfile.ZipInfo(member.filename, date_time=_ZIP_EPOCH)
            info.compress_type = member.compress_type
            info.external_attr = member.external_attr
            target.writestr(info, source.read(member))
    return out.getvalue()
