"""faster_conversion skips coremltools' non-replaceable-var walk only where it would change nothing."""

from __future__ import annotations

from typing import Any

import coremltools as ct
import numpy as np
from coremltools.converters.mil import Builder as mb
from coremltools.converters.mil.mil import types
from coremltools.converters.mil.mil.block import Block

from lowerkit.coreml_preprocess import _upstream_faster_conversion


def _program(compressed: bool) -> Any:
    """x -> add(x, w) -> relu; `w` a const, or a constexpr (compressed) weight when `compressed`."""

    @mb.program(
        input_specs=[mb.TensorSpec(shape=(2, 4), dtype=types.fp32)], opset_version=ct.target.iOS16
    )
    def prog(x: Any) -> Any:
        if compressed:
            w = mb.constexpr_affine_dequantize(
                quantized_data=np.arange(8, dtype=np.int8).reshape(2, 4),
                zero_point=np.int8(0), scale=np.float32(0.5), axis=0,
            )  # fmt: skip
        else:
            w = mb.const(val=np.ones((2, 4), dtype=np.float32))
        return mb.relu(x=mb.add(x=x, y=w))

    return prog


def _sets(function: Any) -> list[set[str]]:
    return [
        {v.name for v in out.nonreplaceable_vars_upstream}
        for op in function.operations
        for out in op.outputs
    ]


def test_uncompressed_program_has_nothing_to_propagate() -> None:
    function = _program(compressed=False).functions["main"]
    assert _upstream_faster_conversion.nothing_to_propagate(function)
    before = _sets(function)
    Block.__dict__["_propagate_nonreplaceable_vars"](function)  # coremltools' own walk
    assert _sets(function) == before == [set()] * len(before)


def test_compressed_weight_or_a_stale_set_runs_the_walk() -> None:
    compressed = _program(compressed=True).functions["main"]
    assert not _upstream_faster_conversion.nothing_to_propagate(compressed)
    assert any(_sets(compressed))  # the walk had work: add / relu depend on the constexpr
    plain = _program(compressed=False).functions["main"]
    relu = plain.operations[-1].outputs[0]
    relu.nonreplaceable_vars_upstream = {plain.inputs["x"]}  # stale: the walk would empty it
    assert not _upstream_faster_conversion.nothing_to_propagate(plain)
    with _upstream_faster_conversion.faster_conversion(), plain:  # the replaced walk, at the block's exit
        pass
    assert relu.nonreplaceable_vars_upstream == set()


def test_the_walk_is_replaced_only_inside_faster_conversion() -> None:
    stock = Block.__dict__["_propagate_nonreplaceable_vars"]
    with _upstream_faster_conversion.faster_conversion():
        assert Block.__dict__["_propagate_nonreplaceable_vars"] is not stock
    assert Block.__dict__["_propagate_nonreplaceable_vars"] is stock
