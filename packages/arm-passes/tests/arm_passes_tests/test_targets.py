"""Every pass class in the Arm pipelines (every target) is accounted for in the audited target table."""

from __future__ import annotations

from typing import Any

import pytest
from executorch.exir.pass_base import ExportPass

from lowerkit.arm_passes import (
    ARM_TARGETS,
    PassTargets,
    arm_pipeline_passes,
    arm_tfa_passes,
    audit,
    targets_of,
)
from lowerkit.arm_passes.targets import (
    LISTED_TARGETS,
    REPLAY_AFTER_IN_PLACE_EDITS,
    WHOLE_GRAPH,
    WHOLE_GRAPH_REPLAYS,
    no_quantized_fake_kernel_ops,
)

#: Pipeline lengths ExecuTorch 1.5.1's ArmPassManager builds (U55 has no DecomposeMaskedFillPass;
#: U65 compiles to the same "+u55" TOSA subset).
EXPECTED_LENGTHS = {
    "TOSA-1.0+INT": 147,
    "TOSA-1.0+FP": 147,
    "TOSA-1.0+INT+int16": 147,
    **{f"ethos-u55-{macs}": 146 for macs in (32, 64, 128, 256)},
    **{f"ethos-u65-{macs}": 146 for macs in (256, 512)},
    **{f"ethos-u85-{macs}": 147 for macs in (128, 256, 512, 1024, 2048)},
    # TOSA-1.0+INT / FP plus the three passes VgfBackend.preprocess inserts (grid_sampler rewrites).
    "vgf-int": 150,
    "vgf-fp": 150,
}


@pytest.fixture(scope="module")
def backend_pipelines() -> dict[str, list[object]]:
    return {target: arm_pipeline_passes(target) for target in ARM_TARGETS}


@pytest.fixture(scope="module")
def pipelines(backend_pipelines: dict[str, list[object]]) -> dict[str, list[object]]:
    """Every pipeline: the backend's, and the quantizer's transform_for_annotation (``tfa:<target>``)."""
    return {**backend_pipelines, **{f"tfa:{target}": arm_tfa_passes(target) for target in ARM_TARGETS}}


def test_every_pass_is_accounted_for(pipelines: dict[str, list[object]]) -> None:
    for target, passes in pipelines.items():
        assert audit(passes) == [], f"{target}: passes with no targets and no whole-graph reason"


def test_pipeline_lengths_match_executorch(backend_pipelines: dict[str, list[object]]) -> None:
    assert {t: len(p) for t, p in backend_pipelines.items()} == EXPECTED_LENGTHS


def test_tfa_pipeline_lengths_match_executorch(pipelines: dict[str, list[object]]) -> None:
    """transform_for_annotation's pass count per target (Ethos-U55 / U65 build one pass fewer)."""
    lengths = {target: len(pipelines[f"tfa:{target}"]) for target in ARM_TARGETS}
    assert lengths == {target: 53 if target.startswith(("ethos-u55", "ethos-u65")) else 54 for target in ARM_TARGETS}


def test_entries_are_either_targeted_or_reasoned(pipelines: dict[str, list[object]]) -> None:
    for passes in pipelines.values():
        for graph_pass in passes:
            entry = targets_of(graph_pass)
            assert isinstance(entry, PassTargets)
            if entry.ops is None:
                assert entry.source == "whole-graph" and entry.reason
                assert "\n" not in entry.reason
            else:
                assert entry.ops and entry.source in ("upstream", "listed")


def test_table_has_no_stale_names(pipelines: dict[str, list[object]]) -> None:
    names = {type(p).__name__ for passes in pipelines.values() for p in passes}
    assert set(WHOLE_GRAPH) <= names, set(WHOLE_GRAPH) - names
    assert set(LISTED_TARGETS) <= names, set(LISTED_TARGETS) - names


def test_a_listed_entry_wins_and_resolves_its_ops(monkeypatch: pytest.MonkeyPatch) -> None:
    """LISTED_TARGETS is empty in ExecuTorch 1.5.1; an entry must still take precedence."""
    from executorch.exir.dialects._ops import ops as exir_ops

    from lowerkit.arm_passes import targets

    class PassWithoutTargetAttribute(ExportPass):
        pass

    assert targets_of(PassWithoutTargetAttribute()) is None
    monkeypatch.setitem(targets.LISTED_TARGETS, "PassWithoutTargetAttribute", ("edge.aten.relu.default",))
    entry = targets_of(PassWithoutTargetAttribute())
    assert entry is not None and entry.source == "listed"
    assert entry.ops == (exir_ops.edge.aten.relu.default,)
    assert audit([PassWithoutTargetAttribute()]) == []


def test_an_unknown_pass_is_reported() -> None:
    class SomeNewUpstreamPass(ExportPass):
        pass

    assert audit([SomeNewUpstreamPass()]) == ["SomeNewUpstreamPass"]


#: The passes ExecuTorch 1.5.1's VgfBackend.preprocess registers around its TOSA pipeline.
VGF_ONLY = {"InsertGridSamplerGridDequantPass", "FuseGridSamplerFlowOffsetPass", "RewriteGridSamplerToTosaCustomPass"}


def test_vgf_pipelines_are_tosa_with_the_vgf_passes(pipelines: dict[str, list[object]]) -> None:
    """VGF lowers through its profile's TOSA pipeline plus the passes VgfBackend inserts, and the
    insertion does not leak into later pipelines (upstream's pass-insertion table is put back)."""
    for vgf, tosa in (("vgf-int", "TOSA-1.0+INT"), ("vgf-fp", "TOSA-1.0+FP")):  # backend pipelines
        names = [type(p).__name__ for p in pipelines[vgf]]
        assert VGF_ONLY <= set(names)
        assert [n for n in names if n not in VGF_ONLY] == [type(p).__name__ for p in pipelines[tosa]]
    after = {type(p).__name__ for p in arm_pipeline_passes("TOSA-1.0+INT")}
    assert not VGF_ONLY & after


def test_passes_that_fast_copy_after_in_place_edits_replay_with_exportpass_call(
    pipelines: dict[str, list[object]],
) -> None:
    """Each REPLAY_AFTER_IN_PLACE_EDITS entry is a targeted pass whose own call() ends in one
    ExportPass replay (``super().call``) and whose call_operator is ArmPass's or its own."""
    import inspect

    passes = {type(p).__name__: p for ps in pipelines.values() for p in ps}
    assert REPLAY_AFTER_IN_PLACE_EDITS <= set(passes), REPLAY_AFTER_IN_PLACE_EDITS - set(passes)
    for name in REPLAY_AFTER_IN_PLACE_EDITS:
        graph_pass: Any = passes[name]
        entry = targets_of(graph_pass)
        assert entry is not None and entry.ops is not None, name
        call = type(graph_pass).call
        assert call is not ExportPass.call, f"{name} no longer overrides call()"
        assert inspect.getsource(call).count("super().call(") == 1, name


def test_whole_graph_replays_edit_in_place_then_replay_with_arm_pass_call_operator(
    pipelines: dict[str, list[object]],
) -> None:
    """Each WHOLE_GRAPH_REPLAYS entry is a whole-graph pass whose own call() ends in one ExportPass
    replay (``super().call``) and that inherits ArmPass's (or ExportPass's) call_operator."""
    import inspect

    from executorch.backends.arm._passes.arm_pass import ArmPass

    passes = {type(p).__name__: p for ps in pipelines.values() for p in ps}
    assert WHOLE_GRAPH_REPLAYS <= set(passes), WHOLE_GRAPH_REPLAYS - set(passes)
    assert not WHOLE_GRAPH_REPLAYS & REPLAY_AFTER_IN_PLACE_EDITS
    for name in WHOLE_GRAPH_REPLAYS:
        graph_pass: Any = passes[name]
        entry = targets_of(graph_pass)
        assert entry is not None and entry.ops is None, name
        assert inspect.getsource(type(graph_pass).call).count("super().call(") == 1, name
        own = [c for c in type(graph_pass).__mro__ if "call_operator" in vars(c) and c not in (ArmPass, ExportPass)]
        assert [c.__name__ for c in own] == ["_ExportPassBase"], name


def test_arm_pass_call_operator_is_special_for_exactly_the_listed_ops() -> None:
    """no_quantized_fake_kernel_ops is the set ``ArmPass.call_operator`` spells out (its source is pinned)."""
    import inspect

    from executorch.backends.arm._passes.arm_pass import ArmPass
    from executorch.exir.dialects._ops import ops as exir_ops

    source = inspect.getsource(ArmPass.call_operator)
    spelled = [line.strip().rstrip(",") for line in source.split("{", 1)[1].split("}", 1)[0].splitlines()]
    named = set()
    for dotted in filter(None, spelled):
        op: Any = exir_ops
        for part in dotted.split(".")[1:]:  # "exir_ops.edge.aten.bmm.default"
            op = getattr(op, part)
        named.add(op)
    assert named == no_quantized_fake_kernel_ops()
