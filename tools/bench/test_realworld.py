"""bench.realworld's failure records (no lowering here)."""

import pytest

from bench.realworld import DOCUMENTED_FIXES, TIMEOUT_ERROR, first_line, lost, summarize


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


#: What stock raised on GPT-2 to TOSA INT (docs/benchmarks.md, before SCALAR_OF_A_WEIGHT).
GPT2_STOCK_ERROR = (
    "Exception: An error occurred when running the 'ReplaceScalarWithTensorByProfilePass' pass after the "
    "following passes: ['RemoveGraphAssertsPass'] (caused by AttributeError: 'Parameter' object has no "
    "attribute 'to_tensor')"
)


def _runs(stock_error: str | None) -> list[dict]:
    """One run per side: stock failing with `stock_error`, lowerkit's two sides passing, same bytes."""
    passing: dict = {"ok": True, "error": None, "seconds": 1.0, "stages": {}, "peak_rss_mb": 100.0, "pte_sha256": "a",
               "payload_digests": ["p"], "delegates": 1, "pte_bytes": 10}  # fmt: skip
    stock = {"side": "stock", "ok": False, "error": stock_error, "peak_rss_mb": 100.0}
    return [{**run, "load_at_start": 1.0} for run in (stock, {**passing, "side": "dropin"}, {**passing, "side": "api"})]


def test_a_stock_failure_lowerkit_fixes_on_purpose_is_flagged_but_not_lost():
    result = summarize("hf:gpt2_2l", "TOSA-1.0+INT", _runs(GPT2_STOCK_ERROR), ["stock", "dropin", "api"])
    assert result["passed_only_on"] == ["api", "dropin"]
    assert result["documented_fix"] == "lowerkit.arm_passes.upstream_fixes:SCALAR_OF_A_WEIGHT"
    assert not lost(result)


def test_a_stock_failure_without_a_documented_fix_is_a_lost_case():
    result = summarize("hf:gpt2_2l", "TOSA-1.0+INT", _runs("RuntimeError: boom"), ["stock", "dropin", "api"])
    assert result["passed_only_on"] and result["documented_fix"] is None
    assert lost(result)


def test_a_lowerkit_side_failing_with_a_documented_text_is_still_lost():
    runs = _runs(None)
    runs[0] = {**runs[1], "side": "stock"}
    runs[2] = {"side": "api", "ok": False, "error": GPT2_STOCK_ERROR, "peak_rss_mb": 1.0, "load_at_start": 1.0}
    result = summarize("hf:gpt2_2l", "TOSA-1.0+INT", runs, ["stock", "dropin", "api"])
    assert result["documented_fix"] is None and lost(result)


def test_a_side_stopped_by_the_timeout_is_recorded_not_lost():
    """A worker killed at ``--timeout`` leaves no record of its own (no peak RSS): the case is
    summarized, the side named as timed out, and the case not counted as lost."""
    runs = _runs(None)
    runs[0] = {"side": "stock", "ok": False, "error": f"{TIMEOUT_ERROR} 1500 s", "load_at_start": 1.0, "process_s": 1500.0}
    result = summarize("hf:gpt2_2l", "TOSA-1.0+INT", runs, ["stock", "dropin", "api"])
    assert result["timed_out"] == ["stock"]
    assert result["sides"]["stock"]["peak_rss_mb"] is None
    assert result["passed_only_on"] == ["api", "dropin"]
    assert not lost(result)


@pytest.mark.parametrize("fix", list(DOCUMENTED_FIXES))
def test_each_documented_fix_names_a_patch_lowerkit_has(fix):
    import importlib

    from lowerkit.pass_infra.accelerations.patching import Patch

    module, _, name = fix.partition(":")
    assert isinstance(getattr(importlib.import_module(module), name), Patch)


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


def test_a_multifunction_models_functions_are_named_in_name_order_not_map_order():
    """A multifunction model's functions are a protobuf map, iterated in an order that varies from
    process to process: the canonical names must not follow it (the prefill + decode export)."""
    import coremltools as ct

    from bench.realworld_flows import _generated_names

    def spec(functions: tuple[str, ...]) -> object:
        model = ct.proto.Model_pb2.Model()
        for name in functions:
            block = model.mlProgram.functions[name].block_specializations["CoreML8"]
            op = block.operations.add()
            op.outputs.add().name = f"{name}_transpose_0"
            block.outputs.append("out")
        return model

    names = _generated_names(spec(("prefill", "forward")))
    assert names == _generated_names(spec(("forward", "prefill"))) == {"forward_transpose_0": "%0", "prefill_transpose_0": "%1"}


_PREIMPORT_THEN_CHECK = """
import sys
from bench.realworld_flows import preimport
preimport(sys.argv[1], True)
from lowerkit.coreml_preprocess import conflict
from lowerkit.coreml_preprocess.backend import CoreMLBackend
conflict.ensure_sole_backend(CoreMLBackend)
"""


def test_a_lowerkit_core_ml_side_preimports_no_executorch_core_ml_backend():
    """A lowerkit Core ML side that imported ExecuTorch's backend could not lower at all (one per process)."""
    import subprocess
    import sys

    done = subprocess.run(
        [sys.executable, "-c", _PREIMPORT_THEN_CHECK, "dropin"], capture_output=True, text=True, check=False
    )
    assert done.returncode == 0, done.stderr[-2000:]


def test_the_drop_in_side_keeps_the_floors_of_the_run_its_stages_come_from():
    runs = _runs(None)
    runs[0] = {**runs[1], "side": "stock"}
    runs[1] = {**runs[1], "stages": {"export": 1.0}, "floors": {"export": 0.5}, "floor_parts": {"changed_passes": 3}}
    result = summarize("hf:gpt2_2l", "TOSA-1.0+INT", runs, ["stock", "dropin", "api"])
    assert result["sides"]["dropin"]["floors"] == {"export": 0.5}
    assert result["sides"]["dropin"]["floor_parts"] == {"changed_passes": 3}
    assert "floors" not in result["sides"]["stock"]
