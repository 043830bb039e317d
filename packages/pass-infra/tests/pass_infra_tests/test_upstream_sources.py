"""Upstream functions pass-infra copies or replaces: a torch / ExecuTorch bump fails here, naming them."""

from __future__ import annotations

from lowerkit.pass_infra.accelerations.table import ACCELERATIONS, audit
from lowerkit.pass_infra.accelerations.versions import changed_sources

#: upstream function -> (source hash, the lowerkit code to re-read when it changes).
UPSTREAM: dict[str, tuple[str, str]] = {
    "torch.fx.graph:Graph.create_node": ("7e8353cfe5d2ae96", "pass-infra _upstream.append_call_node"),
    "torch.fx.proxy:TracerBase.create_node": ("a31a10139c2eb3d8", "pass-infra replay_engine.copy_node_direct, _upstream.direct_copy_possible"),
    "torch.fx.proxy:TracerBase.create_proxy": ("e231173e48cff542", "pass-infra cheaper_replay._traced_node"),
    "torch.fx.traceback:set_current_meta": ("9bf67dca43487acd", "pass-infra _upstream.shared_current_meta"),
    "torch.fx.traceback:NodeSource.__init__": ("99395e7f40a4a049", "pass-infra _upstream.shared_node_source"),
    "torch.fx.interpreter:Interpreter.run_node": ("c364ef1c145a2a3d", "pass-infra _upstream.replay_run_node"),
    "torch.fx.interpreter:Interpreter._set_current_node": ("16abc6b268fb7be5", "pass-infra _upstream.overrides_set_current_node"),
    "executorch.exir.pass_base:_ExportPassBase.ExportInterpreter.run_node": ("4825448c64e2c672", "pass-infra _upstream.replay_run_node"),
    "executorch.exir.pass_base:_ExportPassBase._fx": ("d21aacbb5c107fba", "pass-infra cheaper_replay._cheap_fx / _dispatch / _traced_node"),
    "executorch.exir.pass_base:_ExportPassBase.call_submodule": ("d0245b732570ca52", "pass-infra _upstream.lazy_call_submodule"),
    "executorch.exir.pass_base:_ExportPassBase.call": ("689e39bb23b9834c", "pass-infra _upstream.lazy_call_submodule (its callers' state)"),
    "executorch.exir.pass_base:_ExportPassBase.ExportTracer.set_metadata": ("ca07dc1f73717617", "pass-infra cheaper_replay._cheap_set_metadata"),
    "executorch.exir.pass_base:_ExportPassBase.ExportTracer.create_arg": ("e6e164d8b63fb1db", "pass-infra cheaper_replay._fast_create_arg"),
    "executorch.exir.pass_base:ExportPass.ExportTracer.create_arg": ("e62a74465159fb27", "pass-infra cheaper_replay._fast_create_arg"),
    "torch.fx.proxy:TracerBase.create_arg": ("eec436601a27887a", "pass-infra cheaper_replay._fast_create_arg"),
    "torch.fx._symbolic_trace:Tracer.create_arg": ("433a92814bdbb004", "pass-infra cheaper_replay._fast_create_arg"),
    "executorch.exir.pass_base:_ExportPassBase._validate_symbolic_input_snapshots": ("e11ed6e366f13ee8", "pass-infra cheaper_replay.validate_symbolic_inputs"),
    "executorch.exir.pass_base:_ExportPassBase._capture_symbolic_input_snapshots": ("674d9015fb5c9b4b", "pass-infra cheaper_replay.validate_symbolic_inputs"),
    "executorch.exir.pass_base:_extract_symbolic_snapshot": ("b351a00dc886f364", "pass-infra cheaper_replay.plainly_static"),
    "torch._library.utils:is_builtin": ("f8524c97621ee850", "pass-infra fake_cache._is_builtin (FAKE_CACHE)"),
    "torch._subclasses.fake_tensor:FakeTensorMode._validate_cache_key": ("6e680de04c253ada", "pass-infra fake_cache._validate_cache_key (FAKE_CACHE)"),
    "torch._subclasses.fake_tensor:_set_cache_key": ("08684370625677ba", "pass-infra fake_cache._set_cache_key (FAKE_CACHE)"),
    "torch._subclasses.fake_tensor:_set_cache_key_for_shape_env": ("69b2df36357e38b2", "pass-infra fake_cache._set_cache_key_for_shape_env (FAKE_CACHE)"),
    "torch._subclasses.fake_tensor:FakeTensorMode._cached_dispatch_impl": ("adf4bc424fae16f3", "pass-infra fake_cache.FAKE_CACHE (cache lookup order)"),
    "torch._export.utils:_collect_all_valid_cia_ops": ("1d09a99ea79bd377", "pass-infra _upstream_cia_scan.collect_all_valid_cia_ops (CIA_SCAN)"),
    "torch._export.utils:_collect_all_valid_cia_ops_for_namespace": ("c26d5cd619830773", "pass-infra _upstream_cia_scan.collect_all_valid_cia_ops (CIA_SCAN)"),
    "torch._export.utils:_materialize_cpp_cia_ops": ("51472f6b4e2c3782", "pass-infra _upstream_cia_scan.collect_all_valid_cia_ops (idempotent materialization)"),
    "torch.export.exported_program:_override_composite_implicit_decomp": ("4422dc79d0792af7", "pass-infra _upstream_cia_scan.override_composite_implicit_decomp (CIA_SCAN)"),
    "torch._ops:OperatorBase.py_impl": ("8173bd205b783783", "pass-infra _upstream_cia_scan.plain_py_impl (CIA_SCAN)"),
    "executorch.backends.xnnpack._passes.convert_to_sdpa:ConvertToSDPAPass.call": ("4a789124b2f94fae", "pass-infra pattern_skip._skipping_call, _upstream.xnnpack_pattern_passes"),
    "executorch.backends.xnnpack._passes.convert_to_upsample_bilinear2d:ConvertToUpsampleBilinear2d.call": ("d6d9c859f8b87991", "pass-infra pattern_skip._skipping_call, _upstream.xnnpack_pattern_passes"),
    "torch.fx.passes.utils.matcher_utils:SubgraphMatcher._nodes_are_equal": ("b3cf5de7a34912b7", "pass-infra pattern_skip.cannot_match"),
    "torchao.quantization.pt2e.observer:HistogramObserver._non_linear_param_search": ("9306a687ba73a304", "pass-infra histogram_search.non_linear_param_search"),
    "torchao.quantization.pt2e.observer:HistogramObserver._compute_quantization_error": ("7521b64266ceb072", "pass-infra _upstream.histogram_quantization_error"),
    "torch.export.exported_program:ExportedProgram.run_decompositions": ("c74cbc17d3874021", "pass-infra retrace_skip (what a re-trace changes)"),
    "torch.export.exported_program:ExportedProgram._update": ("596f8425ab63efe9", "pass-infra _upstream.copy_exported_program"),
    "torch.fx.experimental.proxy_tensor:PythonKeyTracer.create_node": ("d133105ae984ef0f", "pass-infra _upstream.record_eager_input_vals, replay_engine.copy_node_direct (where eager_input_vals goes)"),
    "torch._export.utils:placeholder_naming_pass": ("7dce7db10a539998", "pass-infra local_decomposition.trace_names"),
    "torch.fx.experimental.proxy_tensor:proxy_call": ("879bdf47594b028f", "pass-infra local_decomposition.trace_names (_upstream.trace_candidate_name)"),
    "torch.fx.graph:_Namespace.create_name": ("7116b6050a366754", "pass-infra local_decomposition.trace_names"),
    "torch._export.utils:_collect_param_buffer_metadata": ("4b574aa69372f1bd", "pass-infra local_decomposition.record_as_traced (weight placeholders)"),
    "torch._export.utils:_populate_param_buffer_metadata_to_new_gm": ("89e75119b33fa818", "pass-infra local_decomposition.record_as_traced (weight placeholders)"),
    "torch.export.exported_program:_decompose_and_get_gm_with_new_signature_constants": ("93ddd4ba4ed9f3fe", "pass-infra local_decomposition (what a re-trace records)"),
    "torch.export.exported_program:_decompose_exported_program": ("1949ba42c1237735", "pass-infra local_decomposition._renamed_call_graph"),
    "executorch.exir.verification.verifier:_check_tensor_args_matching_op_allowed_dtype": ("5223802f594bd06b", "pass-infra verified_graphs.graph_key / passes_on_recorded_values (what the check reads)"),
    "executorch.exir.verification.verifier:_get_inputs": ("31f3f769363e4cae", "pass-infra verified_graphs.graph_key (what the check reads)"),
    "torch.fx.graph:Graph.node_copy": ("1ea7e7358568c428", "pass-infra verified_graphs._node_copy (replay_engine.vouch_copy: meta copied, arguments transformed)"),
    "torch._subclasses.fake_tensor:unset_fake_temporarily": ("8310fcc18043ace9", "pass-infra _upstream.outside_fake_mode"),
    "executorch.exir.verification.arg_validator:EdgeOpArgValidator": ("0ac1c71272c8ad21", "pass-infra verified_graphs.graph_key / _upstream.recorded_value_arg_validator (its call_function hands each call to super())"),
    "executorch.exir.verification.verifier:_detect_fake_mode_from_gm": ("a4e91e4071a50500", "pass-infra _upstream.edge_verifier_context (the check's fake mode)"),
    "executorch.exir.dialects.edge._ops:EdgeOpOverload.__call__": ("e72d6e1844bdf4f7", "pass-infra cheaper_replay._computes_as (an edge op computes its ATen op)"),
    "executorch.exir.pass_base:_ExportPassBase.placeholder": ("3b80e7c55339406d", "pass-infra _upstream.replay_run_node (placeholder metadata is the old node's)"),
    "torch._export.pass_base:_ExportPassBaseDeprecatedDoNotUse.placeholder": ("9f48a0d2b03c2ff9", "pass-infra _upstream.replay_run_node (placeholder metadata is the old node's)"),
    "torch.fx.passes.infra.pass_manager:PassManager.__call__": ("9521ae3324d8ea64", "pass-infra deferred_recompile.call_with_deferred_recompile"),
    "torch.fx.graph_module:GraphModule.__new__": ("9b3b555879e4a3e7", "pass-infra deferred_recompile (per-instance classes)"),
    "torch.fx._lazy_graph_module:_LazyGraphModule.recompile": ("dfcf59d54b8ce763", "pass-infra deferred_recompile (what a lazy recompile does)"),
    "torch.export.graph_signature:ExportGraphSignature.inputs_to_parameters.fget": ("9570497adc19a1c4", "pass-infra signature_lookups.SIGNATURE_LOOKUPS (what a lookup reads)"),
    "torch._export.pass_base:_ExportPassBaseDeprecatedDoNotUse.ExportInterpreter.run_node": ("4825448c64e2c672", "pass-infra _upstream.replay_run_node"),
    "torch._export.pass_base:_ExportPassBaseDeprecatedDoNotUse.call_submodule": ("62f7a41be427a3e0", "pass-infra _upstream.lazy_call_submodule (validate=None)"),
    "torch._export.pass_base:_ExportPassBaseDeprecatedDoNotUse.call": ("5bba6f4a70059917", "pass-infra _upstream.lazy_call_submodule (its callers' state)"),
    "torch._export.pass_base:_ExportPassBaseDeprecatedDoNotUse._fx": ("fc5bee485d9e884b", "pass-infra cheaper_replay._cheap_fx (its dispatch branch), _traced_node"),
    "torch._export.pass_base:_ExportPassBaseDeprecatedDoNotUse.ExportTracer.set_metadata": ("a220bfbf1f92d4a8", "pass-infra cheaper_replay._cheap_set_metadata"),
    "torch.export.graph_signature:ExportGraphSignature.inputs_to_buffers.fget": ("46d089e80e39192e", "pass-infra signature_lookups.SIGNATURE_LOOKUPS (what a lookup reads)"),
    "torch.export.graph_signature:ExportGraphSignature.inputs_to_lifted_tensor_constants.fget": ("267dde1485fc2c13", "pass-infra signature_lookups.SIGNATURE_LOOKUPS (what a lookup reads)"),
    "torch.fx.passes.infra.partitioner:_DependencyViewer.__init__": ("15364a648eaf2a81", "pass-infra partition_reachability.downstream_bitsets (the same relation)"),
    "torch.fx.passes.infra.partitioner:_DependencyViewer.downstreams_of": ("5044b53fc189bcf2", "pass-infra partition_reachability._downstreams_of"),
    "torch.fx.passes.infra.partitioner:CapabilityBasedPartitioner.propose_partitions": ("f64014355cd42e0b", "pass-infra partition_reachability (downstreams_of is only iterated, order-free)"),
    "torch.fx.graph:Graph.eliminate_dead_code": ("e3cde4c528c19a08", "pass-infra dead_code.eliminate_dead_code (erases `not has_side_effect(node) and not node.users`; impure_random as _upstream.dead_code_impure_random)"),
    "torch.fx.node:Node.is_impure": ("c7442b53894235c0", "pass-infra dead_code (a query with no side effects; raises only for call_module nodes, which are still asked)"),
    "torch.fx.graph_module:_exec_with_source": ("3a1510761d07726e", "pass-infra compiled_code._exec_with_source"),
    "torch.fx.graph_module:_EvalCacheLoader.cache": ("60fca99748e8abec", "pass-infra compiled_code (each compile's file name is the loader's key)"),
    "torch.fx.graph_module:_method_from_src": ("b832e6102b1d8987", "pass-infra _upstream.fx_graph_module_module (_exec_with_source looked up per call)"),
    "torch.ao.quantization.fx.utils:get_new_attr_name_with_prefix": ("1b607f727ed24eca", "pass-infra attribute_names.fresh_attribute_namer (FRESH_ATTRIBUTE_NAMES)"),
    "torchao.quantization.pt2e.utils:get_new_attr_name_with_prefix": ("1b607f727ed24eca", "pass-infra attribute_names.fresh_attribute_namer (FRESH_ATTRIBUTE_NAMES)"),
    "torch.fx._lazy_graph_module:_use_lazy_graph_module": ("760f4a1ab780b360", "pass-infra deferred_recompile.export_deferring_recompiles (_upstream.lazy_graph_modules)"),
    "torch.export:export": ("668c292abe414f93", "pass-infra deferred_export.export_deferring_recompiles (DEFERRED_EXPORT replaces it)"),
    "executorch.exir.pass_base:_ExportPassBase": ("713db8b49c7972f4", "pass-infra cheaper_replay._LazyDebugStr (node_debug_str: who writes and reads it)"),
    "torch._export.pass_base:_ExportPassBaseDeprecatedDoNotUse": ("79468a04b3706922", "pass-infra cheaper_replay._LazyDebugStr (node_debug_str: who writes and reads it)"),
    "torch.export.exported_program:_create_graph_module_for_export": ("48b7876d28b72335", "pass-infra _upstream.lazy_export_graph_module (LAZY_COPIES)"),
    "torch.export.graph_signature:InputSpec": ("f01e968c3aa62877", "pass-infra signature_lookups._counting_setattr (SIGNATURE_LOOKUPS: its __setattr__)"),
    "torch.export.graph_signature:TensorArgument": ("92772c14426b68d7", "pass-infra signature_lookups._counting_setattr (SIGNATURE_LOOKUPS: its __setattr__)"),
    "torch.export.graph_signature:SymIntArgument": ("3ebf57df0b566533", "pass-infra signature_lookups._counting_setattr (SIGNATURE_LOOKUPS: its __setattr__)"),
    "torch.export.graph_signature:SymFloatArgument": ("7afaf4e533ac2fea", "pass-infra signature_lookups._counting_setattr (SIGNATURE_LOOKUPS: its __setattr__)"),
    "torch.export.graph_signature:SymBoolArgument": ("c1548ac405acb3b1", "pass-infra signature_lookups._counting_setattr (SIGNATURE_LOOKUPS: its __setattr__)"),
    "torch.export.graph_signature:ConstantArgument": ("e00ffe15193c09a8", "pass-infra signature_lookups._counting_setattr (SIGNATURE_LOOKUPS: its __setattr__)"),
    "torch.export.graph_signature:CustomObjArgument": ("a231fffb62596f32", "pass-infra signature_lookups._counting_setattr (SIGNATURE_LOOKUPS: its __setattr__)"),
    "torch.export.graph_signature:TokenArgument": ("13f5b00a58299a99", "pass-infra signature_lookups._counting_setattr (SIGNATURE_LOOKUPS: its __setattr__)"),
}


def test_upstream_sources_are_the_ones_lowerkit_copies() -> None:
    problems = changed_sources(UPSTREAM)
    assert not problems, "\n".join(problems)



def test_the_table_lists_every_patch_and_each_replaced_function_has_a_source_hash() -> None:
    problems = audit("lowerkit.pass_infra", ACCELERATIONS, UPSTREAM)
    assert not problems, "\n".join(problems)
