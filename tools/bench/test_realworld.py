"""bench.realworld's failure records (no lowering here)."""

import pytest

from bench.realworld import first_line


def _wrapped() -> Exception:
    try:
        try:
            raise RuntimeError("shape mismatch\nin aten.add")
        except RuntimeError as error:
            raise Exception("An error occurred when running the 'SomePass' pass") from error
    except Exception as error:
        return error


def test_a_plain_error_is_its_type_and_first_line():
    assert first_line(ValueError("bad input\nmore")) == "ValueError: bad input"


def test_a_wrapped_error_names_its_root_cause():
    assert first_line(_wrapped()) == (
        "Exception: An error occurred when running the 'SomePass' pass (caused by RuntimeError: shape mismatch)"
    )


def test_a_suppressed_context_is_not_a_cause():
    with pytest.raises(KeyError) as caught:
        try:
            raise ValueError("inner")
        except ValueError:
            raise KeyError("outer") from None
    assert first_line(caught.value) == "KeyError: 'outer'"


def _program(first: str, second: str, last_op: str = "relu") -> bytes:
    """A Core ML model spec: x -> transpose (`first`) -> transpose (`second`) -> `last_op` (out)."""
    import coremltools as ct

    spec = ct.proto.Model_pb2.Model()
    function = spec.mlProgram.functions["main"]
    function.inputs.add().name = "x"
    block = function.block_specializations["CoreML7"]
    for op_type, name, source in (("transpose", first, "x"), ("transpose", second, first), (last_op, "out", second)):
        op = block.operations.add()
        op.type = op_type
        op.inputs["x"].arguments.add().name = source
        op.outputs.add().name = name
    block.outputs.append("out")
    return bytes(spec.SerializeToString())


def test_generated_value_names_do_not_count_in_the_canonical_spec():
    """coremltools numbers the transposes its passes make in memory-address order (stock's own
    payload names them either way): the canonical spec names values by where they are defined,
    keeps the function's inputs and the block's outputs, and still tells programs apart."""
    from bench.realworld_flows import _canonical_spec

    one, names = _canonical_spec(_program("transpose_0", "transpose_1"))
    other, _ = _canonical_spec(_program("transpose_1", "transpose_0"))
    assert one == other
    assert names == {"transpose_0": "%0", "transpose_1": "%1"}
    assert _canonical_spec(_program("transpose_0", "transpose_1", "sigmoid"))[0] != one
