"""Upstream code arm-passes copies, overrides or patches: an ExecuTorch bump fails here, naming it."""

from __future__ import annotations

from lowerkit.arm_passes.accelerations import ACCELERATIONS
from lowerkit.pass_infra.accelerations.table import audit
from lowerkit.pass_infra.accelerations.versions import changed_sources

#: upstream function or class -> (source hash, the lowerkit code to re-read when it changes).
UPSTREAM: dict[str, tuple[str, str]] = {
    "executorch.backends.transforms.replace_scalar_with_tensor:ReplaceScalarWithTensorArgPass.get_replacement": ("0b4b7b846eba81d8", "arm-passes upstream_fixes.get_replacement (its copy for a tensor first argument)"),
    "executorch.backends.arm._passes.arm_pass_manager:ArmPassManager._transform": ("728867ad1c990eb4", "arm-passes runner.FastArmPassManager._transform / _upstream.set_program_graph"),
    "executorch.backends.arm._passes.arm_pass_manager:ArmPassManager.transform_to_backend_pipeline": ("1dfdffd06f7ae5ce", "arm-passes _upstream.build_pass_list"),
    "executorch.backends.arm._passes.arm_pass_manager:ArmPassManager.transform_for_annotation_pipeline": ("1886bcf3e3299b5f", "arm-passes _upstream.build_tfa_pass_list / GRAPH_MODULE_PASSES (builds the module-level GraphModulePassManager)"),
    "executorch.backends.arm._passes.arm_pass_manager:ArmPassManager._transform_graph_module": ("f819a837a20337b9", "arm-passes _upstream_graph_module_passes.GRAPH_MODULE_PASSES (control-flow submodules run through it too)"),
    "torch.fx.passes.infra.pass_manager:PassManager.__call__": ("9521ae3324d8ea64", "arm-passes runner.FastGraphModulePassManager (runs the fast passes through it)"),
    "executorch.exir.pass_manager:ExportedProgramPassManager.check": ("a2cab355650bc461", "arm-passes _upstream.check_program"),
    "executorch.exir.pass_manager:ExportedProgramPassManager": ("a99c4d82f4714459", "arm-passes runner.run_fast_pipeline / _run_on_program / _upstream.update_after_graph_pass"),
    "executorch.backends.arm.tosa.backend:TOSABackend._preprocess": ("ffbbea7c89456884", "arm-passes _upstream_tosa_preprocess.TOSA_PREPROCESS"),
    "executorch.backends.arm.tosa.backend:TOSABackend._preprocess_module": ("6a77a69b3b33b301", "arm-passes _upstream_arm_manager.ARM_MANAGER (imports ArmPassManager lazily)"),
    "executorch.backends.arm._passes.arm_pass:ArmPass.call_operator": ("7f63343d869ae99c", "arm-passes targets.no_quantized_fake_kernel_ops (incremental, WHOLE_GRAPH_REPLAYS) / _upstream_stack_traces.STACK_TRACES (its format_stack()[-2])"),
    "executorch.backends.arm._passes.arm_pass_utils:create_node": ("c1b6bab3bc5ad754", "arm-passes _upstream_stack_traces.STACK_TRACES (its format_stack()[-2])"),
    "executorch.backends.transforms.propagate_view_copy_permute_pass:PropagateViewCopyPermuteUpPass": ("cd1c06c3d5f02d64", "arm-passes incremental.IncrementalPropagateViewCopyPermuteUpPass"),
    "executorch.backends.transforms.propagate_view_copy_permute_pass:PropagateViewCopyPermuteDownPass": ("99d731c2e911ee89", "arm-passes incremental.IncrementalPropagateViewCopyPermuteDownPass"),
    "executorch.backends.transforms.fuse_duplicate_users_pass:FuseDuplicateUsersPass": ("b51364a5d9f50c76", "arm-passes incremental._FuseDuplicateUsers"),
    "executorch.backends.transforms.fuse_identical_input_transforms_pass:FuseIdenticalInputTransformsPass": ("cde680e6d069bc11", "arm-passes incremental._FuseIdenticalInputTransforms"),
    "executorch.backends.transforms.canonicalize_view_copy_permute_pass:CanonicalizeViewCopyPermutePass": ("437a50dfbd411e2e", "arm-passes incremental._CanonicalizeViewCopyPermute"),
    "executorch.backends.arm._passes.remove_permutes_around_elementwise_tosa_ops:RemovePermutesAroundElementwiseTosaOps": ("b80d6a075677d335", "arm-passes incremental._RemovePermutesAroundElementwiseTosaOps"),
    "executorch.backends.arm.vgf.backend:VgfBackend.preprocess": ("88168c628a7d07f1", "arm-passes pipelines.arm_pipeline_passes (VGF) / _upstream.vgf_pass_insertions"),
    "executorch.backends.arm.vgf.backend:_register_vgf_rewrite_passes": ("4a19bb6192b03d30", "arm-passes targets.WHOLE_GRAPH (the VGF-only passes)"),
    "executorch.backends.arm.vgf.model_converter:find_model_converter_binary": ("ebd238a5c6fb5832", "arm-passes converter.locate_model_converter (MODEL_CONVERTER_PATH, then PATH)"),
    "executorch.backends.arm._passes.arm_pass_manager:ArmPassManager": ("b917d54d04877a37", "arm-passes _upstream_arm_manager.ARM_MANAGER (its stand-in subclasses and builds it)"),
    "torch.fx.passes.infra.pass_manager:PassManager": ("f42344987b8125d7", "arm-passes _upstream_graph_module_passes.GRAPH_MODULE_PASSES (its stand-in subclasses and builds it)"),
}


def test_upstream_sources_are_the_ones_lowerkit_was_proven_with() -> None:
    problems = changed_sources(UPSTREAM)
    assert not problems, "\n".join(problems)



def test_the_table_lists_every_patch_and_each_replaced_function_has_a_source_hash() -> None:
    problems = audit("lowerkit.arm_passes", ACCELERATIONS, UPSTREAM)
    assert not problems, "\n".join(problems)
