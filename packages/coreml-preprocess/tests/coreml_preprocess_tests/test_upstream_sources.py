"""Upstream code coreml-preprocess copies, mirrors or patches: a bump fails here, naming it."""

from __future__ import annotations

import hashlib
from pathlib import Path

import executorch

from lowerkit.coreml_preprocess import PROVEN_ON
from lowerkit.coreml_preprocess.accelerations import ACCELERATIONS
from lowerkit.pass_infra.accelerations.table import audit
from lowerkit.pass_infra.accelerations.versions import changed_sources, unproven_differences

#: upstream function -> (source hash, the lowerkit code to re-read when it changes).
UPSTREAM: dict[str, tuple[str, str]] = {
    "coremltools.converters.mil.mil.passes.pass_pipeline:PassPipelineManager.apply_pipeline": ("7bae57bb03db4bf4", "coreml-preprocess _upstream_faster_conversion.apply_pipeline_validating_at_ends"),
    "coremltools.converters._converters_entry:convert": ("c21903e828b18b24", "coreml-preprocess _upstream_faster_conversion.FASTER_CONVERSION (its gc.collect)"),
    "coremltools.converters.mil.mil.block:Block._propagate_nonreplaceable_vars": ("cb2a2fc0f0365468", "coreml-preprocess _upstream_faster_conversion.nothing_to_propagate (what the walk sets)"),
    "coremltools.converters.mil.mil.var:Var._set_nonreplaceable_vars_upstream": ("af8982b5133c081f", "coreml-preprocess _upstream_faster_conversion.nothing_to_propagate (constexpr_ / shape / union of inputs)"),
    "coremltools.converters.mil.converter:_reset_conversion_state": ("416a01148cd847fa", "coreml-preprocess _upstream.reset_conversion_state"),
    "coremltools.models.neural_network.quantization_utils:_get_kmeans_lookup_table_and_weight": ("195b3f07294c3418", "coreml-preprocess _upstream.single_threaded_kmeans (k-means seeding: random_state=0, n_init=1; kmeans1d for large fp16 weights)"),
    "coremltools.converters.mil.mil.passes.defs.quantization:FP16ComputePrecision.fp16_overflow": ("16442a50be56e0f9", "coreml-preprocess _upstream_faster_conversion.fp16_overflow_bounded_first (the test it mirrors)"),
    "coremltools.converters.mil.mil.passes.defs.quantization:FP16ComputePrecision._check_underflow_to_zero": ("ca65abdf8aafa58d", "coreml-preprocess _upstream_faster_conversion._underflow_check_at_once"),
    "coremltools.converters.mil.mil.passes.defs.quantization:AbstractQuantizationPass._close_to_zero": ("a664ca15652ba45c", "coreml-preprocess _upstream_faster_conversion._underflow_check_at_once (np.isclose against 0 as |x| <= smallest subnormal)"),
    "coremltools.converters.mil.mil.types.get_type_info:get_type_info": ("4bc82ca9b3da6f01", "coreml-preprocess _upstream_faster_conversion.memoized_on_classes (a class's type name depends on the class alone)"),
    "coremltools.converters.mil.mil.types.type_mapping:is_tensor": ("0574ba94dd69b322", "coreml-preprocess _upstream_faster_conversion._TYPE_PREDICATES"),
    "coremltools.converters.mil.mil.types.type_mapping:is_str": ("3ff049ba27672b42", "coreml-preprocess _upstream_faster_conversion._TYPE_PREDICATES"),
    "coremltools.converters.mil.mil.types.type_mapping:is_tuple": ("2b1ed554a5259357", "coreml-preprocess _upstream_faster_conversion._TYPE_PREDICATES"),
    "coremltools.converters.mil.mil.types.type_mapping:is_dict": ("9c1c612860f51026", "coreml-preprocess _upstream_faster_conversion._TYPE_PREDICATES"),
    "coremltools.converters.mil.mil.types.type_list:is_list": ("ac49185b78f652af", "coreml-preprocess _upstream_faster_conversion._TYPE_PREDICATES"),
    "coremltools.converters.mil.mil.types.type_state:is_state": ("6ec1a5d05a0f1f27", "coreml-preprocess _upstream_faster_conversion._TYPE_PREDICATES"),
    "coremltools.converters.mil.mil.block:Function.__str__": ("3cf0185c55c8868c", "coreml-preprocess _upstream_faster_conversion._function_str_unless_dropped"),
    "coremltools.converters.mil.mil.passes.defs.optimize_repeat_ops:_TransposeOptimization.apply_transform": ("1596536ee2afc674", "coreml-preprocess _upstream_faster_conversion._debug_message_sites (str(function) only in logger.debug)"),
    "coremltools.converters.mil.mil.passes.defs.optimize_normalization:fuse_layernorm_or_instancenorm.apply": ("5c9e3cf36fa0826f", "coreml-preprocess _upstream_faster_conversion._debug_message_sites (str(function) only in logger.debug)"),
    "coremltools.converters.mil.mil.block:Block.validate": ("fad8243006fc32cf", "coreml-preprocess _upstream_faster_conversion.check_essential_scope (what check_essential_scope=True adds)"),
    "coremltools.converters.mil.mil.block:Function._check_has_scope_info": ("dc10081321b8cf3a", "coreml-preprocess _upstream_faster_conversion.check_essential_scope"),
    "coremltools.converters.mil.mil.program:Program.validate": ("6272d10e561b2990", "coreml-preprocess _upstream_faster_conversion.check_essential_scope"),
    "coremltools.optimize._utils:quantize_weight_by_dtype": ("e58ffef27b29aed3", "coreml-preprocess _upstream_faster_conversion.symmetric_quantization_in_torch (the arithmetic it mirrors)"),
    "coremltools.optimize._utils:get_quant_range_by_dtype": ("b2981d2613ed55d8", "coreml-preprocess _upstream_faster_conversion.symmetric_quantization_in_torch (signed symmetric ranges)"),
    "coremltools.optimize.coreml._config:OptimizationConfig._get_const_op_config": ("78292a693fa0a6ff", "coreml-preprocess compression.apply_weight_compression (settings by const op name)"),
    "executorch.extension.llm.export.partitioner_lib:get_coreml_partitioner": ("fa4b1e36e622a2d6", "coreml-preprocess llm_export.coreml_partitioner (its checks, options and take_over_mutable_buffer)"),
    "executorch.extension.llm.export.quantizer_lib:get_coreml_quantizer": ("4062d3da2624acfe", "coreml-preprocess llm_export.coreml_quantizer (the coreml_8a_c8w config)"),
    "coremltools.optimize.coreml._quantization_passes:palettize_weights.blockwise_compress": ("f81b8a02a97018af", "coreml-preprocess compression._group_check (groups not divisible are skipped)"),
}

#: ExecuTorch's Core ML files lowerkit mirrors (hashed as files: importing them would load
#: ExecuTorch's own CoreMLBackend) -> (hash, what to re-read).
EXECUTORCH_FILES: dict[str, tuple[str, str]] = {
    "backends/apple/coreml/partition/coreml_partitioner.py": ("7831837309211298", "partitioner.py, _upstream.called_from_deprecated_to_backend / is_view_op"),
    "backends/apple/coreml/compiler/coreml_preprocess.py": ("d54b9c0e8588767b", "backend.py, convert.py, options.py"),
    "examples/apple/coreml/llama/export_static_llm_coreml.py": ("7c81c8c387c591c2", "static_llm_export.py, _upstream.static_llm_script (the Core ML names it imports, main's flags)"),
}


def test_proven_on_the_installed_versions() -> None:
    assert unproven_differences(PROVEN_ON) == {}


def test_upstream_sources_are_the_ones_lowerkit_was_proven_with() -> None:
    problems = changed_sources(UPSTREAM)
    root = Path(next(iter(executorch.__path__)))
    for relative, (digest, reread) in EXECUTORCH_FILES.items():
        actual = hashlib.sha256((root / relative).read_bytes()).hexdigest()[:16]
        if actual != digest:
            problems.append(f"executorch/{relative} changed ({digest} -> {actual}): re-read {reread}")
    assert not problems, "\n".join(problems)



def test_the_table_lists_every_patch_and_each_replaced_function_has_a_source_hash() -> None:
    problems = audit("lowerkit.coreml_preprocess", ACCELERATIONS, UPSTREAM)
    assert not problems, "\n".join(problems)
