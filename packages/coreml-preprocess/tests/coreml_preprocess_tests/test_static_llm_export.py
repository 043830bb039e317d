"""ExecuTorch's prefill + decode Core ML export with lowerkit's backend: the names it binds.

The whole export against stock's is ``tests/llm_hf`` (``--prefill``); here, cheaply, what lowerkit
hands the script in place of ExecuTorch's Core ML backend.
"""

from __future__ import annotations

import json
import subprocess
import sys

from lowerkit.coreml_preprocess import (
    CoreMLBackend,
    CoreMLPartitioner,
    MultimethodWeightSharing,
    _upstream,
)

#: ExecuTorch's compile-spec helpers as the script calls them, and with every other argument: the
#: specs as JSON, run with ExecuTorch's names bound (in another process) or lowerkit's.
_CALLS = """
import json
import coremltools as ct
calls = [
    CoreMLBackend.generate_compile_specs(
        minimum_deployment_target=ct.target.iOS18, compute_precision=ct.precision.FLOAT16,
        compute_unit=ct.ComputeUnit.CPU_AND_NE, model_type=CoreMLBackend.MODEL_TYPE.MODEL,
    ),
    CoreMLBackend.generate_compile_specs(),
    CoreMLBackend.generate_compile_specs(
        compute_unit=ct.ComputeUnit.CPU_ONLY, minimum_deployment_target=ct.target.iOS17,
        compute_precision=ct.precision.FLOAT32, model_type=CoreMLBackend.MODEL_TYPE.COMPILED_MODEL,
        op_linear_quantizer_config={"mode": "linear_symmetric", "dtype": "int8"},
        pass_names=["common::dead_code_elimination"],
    ),
    [CoreMLBackend.generate_multimethod_weight_sharing_strategy_compile_spec(s) for s in STRATEGY],
]
specs = json.dumps([[[s.key, bytes(s.value).decode()] for s in specs] for specs in calls])
"""
_EXECUTORCH = (
    "from executorch.backends.apple.coreml.compiler.coreml_preprocess import CoreMLBackend, "
    "MULTIMETHOD_WEIGHT_SHARING_STRATEGY as STRATEGY\n" + _CALLS + "print(specs)"
)


def test_the_compile_spec_helpers_give_executorchs_specs() -> None:
    """ExecuTorch's own helpers run in another process (its backend cannot share one with lowerkit's)."""
    done = subprocess.run([sys.executable, "-c", _EXECUTORCH], capture_output=True, text=True, check=True)
    ours: dict[str, object] = {"CoreMLBackend": CoreMLBackend, "STRATEGY": MultimethodWeightSharing}
    exec(_CALLS, ours)
    assert json.loads(str(ours["specs"])) == json.loads(done.stdout.strip().splitlines()[-1])


def test_the_script_binds_lowerkits_names_and_leaves_no_stand_in_behind() -> None:
    before = {name: sys.modules.get(name) for name in _upstream.STATIC_LLM_SCRIPT_IMPORTS}
    from lowerkit.coreml_preprocess.static_llm_export import static_llm_script

    script = static_llm_script()
    assert script.CoreMLBackend is CoreMLBackend
    assert script.CoreMLPartitioner is CoreMLPartitioner
    assert script.MULTIMETHOD_WEIGHT_SHARING_STRATEGY is MultimethodWeightSharing
    assert {name: sys.modules.get(name) for name in _upstream.STATIC_LLM_SCRIPT_IMPORTS} == before
    assert _upstream.EXECUTORCH_COREML_PREPROCESS_MODULE not in sys.modules
    assert callable(script.main)
