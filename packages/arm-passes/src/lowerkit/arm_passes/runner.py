"""The fast Arm backend pipeline: ArmPassManager's exact pass list, run through lowerkit.pass_infra.

``FastArmPassManager`` is an ``ArmPassManager`` that builds the same pipeline (same classes,
same order, same skip/insertion rules, same constraint check) and only replaces how it is run:
each pass goes through ``PassPipeline`` (cheaper replay, wider FakeTensor cache, should_run
skips and fast-copy from the audited target table), the permute-propagation fixpoints are
swapped for their incremental drop-ins, and the per-pass exported-program bookkeeping of
upstream's ``_ExportedProgramGraphPassAdapter`` is done once per pass.
"""

from __future__ import annotations

import contextlib
import copy
import threading
from collections.abc import Callable, Iterator, Sequence
from typing import Any

from executorch.exir.pass_base import ExportPass
from torch.export import ExportedProgram
from torch.fx import GraphModule
from torch.fx.passes.infra.pass_base import PassResult
from torch.fx.passes.infra.pass_manager import PassManager

from lowerkit.arm_passes import _upstream
from lowerkit.arm_passes.incremental import incremental_version
from lowerkit.arm_passes.targets import (
    REPLAY_AFTER_IN_PLACE_EDITS,
    WHOLE_GRAPH_REPLAYS,
    no_quantized_fake_kernel_ops,
    targets_of,
)
from lowerkit.arm_passes.versions import accelerated_ok
from lowerkit.pass_infra.accelerations.patching import lowering_lock, suspend_all
from lowerkit.pass_infra.accelerations.replay_engine import pipeline_running, vouch_graph
from lowerkit.pass_infra.errors import PassEquivalenceError
from lowerkit.pass_infra.framework.compare import first_difference
from lowerkit.pass_infra.framework.pipeline import PassPipeline, PipelineReport
from lowerkit.pass_infra.framework.targeted_pass import as_targeted, fast_copy_enabled

__all__ = [
    "FastArmPassManager",
    "FastGraphModulePassManager",
    "capture_pass_states",
    "collect_reports",
    "fast_passes",
    "passes_inserted_after",
]

_LOCAL = threading.local()

#: Called with (pass name or "" for the pipeline's input, program, graph module) after each pass.
PassObserver = Callable[[str, ExportedProgram, GraphModule], None]


@contextlib.contextmanager
def _thread_value(name: str, value: Any) -> Iterator[None]:
    """Set ``_LOCAL.<name>`` to `value` for the block (this thread only); the previous value after."""
    previous = getattr(_LOCAL, name, None)
    setattr(_LOCAL, name, value)
    try:
        yield
    finally:
        setattr(_LOCAL, name, previous)


@contextlib.contextmanager
def capture_pass_states(observer: PassObserver) -> Iterator[None]:
    """Call `observer` on the program's input and after every pass of FastArmPassManager runs in this thread.

    The observer sees the live program and graph module (the next pass rewrites them): it must
    copy what it keeps and change nothing. Without an observer the pipeline runs as always.
    """
    with _thread_value("observer", observer):
        yield


@contextlib.contextmanager
def passes_inserted_after(target: type, passes: Sequence[Any]) -> Iterator[None]:
    """Insert `passes` after each `target` pass of the pipelines FastArmPassManager builds in this thread.

    Through upstream's own ``ArmPassManager.insert_passes_after`` (its pipeline raises if
    `target` is not in it); other threads and lowerings outside the block are unaffected.
    For checking tools against a pass bug built on purpose, or trying a pass of your own.
    """
    with _thread_value("insertions", (*(getattr(_LOCAL, "insertions", None) or ()), (target, tuple(passes)))):
        yield


def _observe(name: str, program: ExportedProgram, graph_module: GraphModule) -> None:
    observer = getattr(_LOCAL, "observer", None)
    if observer is not None:
        observer(name, program, graph_module)


@contextlib.contextmanager
def collect_reports(sink: list[PipelineReport], *, track_changes: bool = True) -> Iterator[None]:
    """Append the PipelineReport of every FastArmPassManager run in this thread to `sink`
    (`track_changes`: whether its rows say which passes changed the graph, ``PassPipeline``'s)."""
    with _thread_value("sink", sink), _thread_value("track_changes", track_changes):
        yield


class _ArmStep:
    """One pipeline entry: run a pass on the program's graph with upstream's adapter bookkeeping.

    Skipping is upstream's own (ArmPass.should_run_pass, called inside the pass). The fast
    instance runs: it fast-copies only untargeted nodes pass-infra vouches for (made by a replay,
    or in the pipeline's input, and unchanged since, inputs' values included), so a node an
    in-place pass edited, or a user of one whose value changed, replays as stock. With `verify`, the upstream
    instance is first run the stock way on deep copies, with every lowerkit patch off for the thread
    (`suspend_all`), and the result must match (node names
    included) or PassEquivalenceError is raised.
    """

    def __init__(
        self, graph_pass: Any, program: ExportedProgram, *, original: Any = None, verify: bool = False
    ) -> None:
        self.graph_pass = graph_pass
        self.original = graph_pass if original is None else original
        self.program = program
        self.verify = verify
        self.verified = 0
        self.__name__ = type(graph_pass).__name__

    def should_run_pass(self, graph_module: GraphModule) -> bool:
        """Whether the pass will do work (for the report; the pass is called either way)."""
        should_arm = getattr(self.original, "should_run_pass", None)
        return bool(should_arm(graph_module)) if callable(should_arm) else True

    def __call__(self, graph_module: GraphModule) -> PassResult:
        program = self.program
        reference: GraphModule | None = None
        if self.verify:
            with suspend_all():  # stock: no lowerkit patch, whatever scope the caller holds
                reference_program = copy.deepcopy(program)
                reference = _run_on_program(
                    _reference_copy(self.original),
                    reference_program,
                    reference_program.graph_module,
                    self.__name__,
                ).graph_module
        result = _run_on_program(self.graph_pass, program, graph_module, self.__name__)
        if reference is not None:
            _check_same(self.__name__, reference, result.graph_module)
            self.verified += 1
        _observe(self.__name__, program, result.graph_module)
        return result


def _reference_copy(graph_pass: Any) -> Any:
    """A shallow copy of the upstream pass: deep copies would clone its op sets (EdgeOpOverload
    objects do not survive deepcopy as equal objects), so the copy would not know its own ops."""
    return copy.copy(graph_pass)


def _run_on_program(
    graph_pass: Any, program: ExportedProgram, graph_module: GraphModule, name: str
) -> PassResult:
    """What upstream's _ExportedProgramGraphPassAdapter does around one pass."""
    has_program = hasattr(graph_pass, "exported_program")
    previous = getattr(graph_pass, "exported_program", None)
    if has_program:
        graph_pass.exported_program = program
    try:
        result = graph_pass(graph_module)
    finally:
        if has_program:
            graph_pass.exported_program = previous
    if result is None:
        raise TypeError(f"The result of pass {name} should be type PassResult.")
    if result.modified:
        _upstream.update_after_graph_pass(program, result.graph_module)
    return result


def _check_same(name: str, reference: GraphModule, checked: GraphModule) -> None:
    difference = first_difference(reference, checked)
    if difference is not None:
        raise PassEquivalenceError(name, difference.node, difference.detail)
    for ref_node, node in zip(reference.graph.nodes, checked.graph.nodes, strict=True):
        if ref_node.name != node.name:
            raise PassEquivalenceError(name, node.name, f"node name {node.name!r}, reference has {ref_node.name!r}")


def fast_passes(passes: list[Any]) -> list[Any]:
    """Map upstream pass instances to the instances lowerkit runs: incremental drop-ins or targeted copies."""
    out: list[Any] = []
    for graph_pass in passes:
        replacement = incremental_version(graph_pass)
        if replacement is not graph_pass:
            out.append(replacement)
            continue
        entry = targets_of(graph_pass)
        name = type(graph_pass).__name__
        if entry is not None and entry.ops is not None and isinstance(graph_pass, ExportPass):
            safe = name in REPLAY_AFTER_IN_PLACE_EDITS
            targeted = as_targeted(graph_pass, entry.ops, fast_copy_safe=safe)
            out.append(targeted if fast_copy_enabled(targeted) else graph_pass)
        elif name in WHOLE_GRAPH_REPLAYS and isinstance(graph_pass, ExportPass):
            out.append(
                as_targeted(
                    graph_pass, no_quantized_fake_kernel_ops(), fast_copy_safe=True, skip_without_targets=False
                )
            )
        else:
            out.append(graph_pass)
    return out


def run_fast_pipeline(
    passes: list[Any], exported_program: ExportedProgram, *, verify: bool = False, track_changes: bool = True
) -> tuple[ExportedProgram, PipelineReport]:
    """Run `passes` on a shallow copy of `exported_program` as ExportedProgramPassManager would
    (`track_changes`: ``PassPipeline``'s, whether the report says which passes changed the graph)."""
    program = _upstream.shallow_program_copy(exported_program)
    # PassPipeline takes its input's metadata as consistent: vouched for before the input's
    # check, so the edge verifier's dtype check can read the recorded values (verified_graphs).
    vouch_graph(program.graph_module)
    _upstream.check_program(program)
    _observe("", program, program.graph_module)
    steps = [
        _ArmStep(fast, program, original=original, verify=verify)
        for fast, original in zip(fast_passes(passes), passes, strict=True)
    ]
    graph_module, report = PassPipeline(steps, track_changes=track_changes).run(program.graph_module)
    if verify and not all(step.verified == 1 for step in steps):
        raise AssertionError("verify mode did not check every pass")
    if graph_module is not program.graph_module:
        _upstream.update_after_graph_pass(program, graph_module)
    _upstream.check_program(program)
    return program, report


class FastArmPassManager(_upstream.ArmPassManager):
    """ArmPassManager that runs its own pass list through lowerkit.pass_infra."""

    verify = False

    def __init__(self, compile_spec: Any) -> None:
        super().__init__(compile_spec)
        for target, passes in getattr(_LOCAL, "insertions", None) or ():
            self.insert_passes_after(target, list(passes))

    def _transform(self, exported_program: ExportedProgram, graph_module: GraphModule) -> Any:
        if graph_module is not exported_program.graph_module or not accelerated_ok(
            "FastArmPassManager"
        ):
            return super()._transform(exported_program, graph_module)
        sink = getattr(_LOCAL, "sink", None)
        with lowering_lock():
            transformed, report = run_fast_pipeline(
                list(self.passes),
                exported_program,
                verify=self.verify,
                track_changes=sink is not None and getattr(_LOCAL, "track_changes", True),
            )
        _upstream.set_program_graph(exported_program, transformed)
        if sink is not None:
            sink.append(report)
        return exported_program.graph_module


class FastGraphModulePassManager(PassManager):
    """torch's ``PassManager`` as ArmPassManager's graph-module pipelines build it (the Arm
    quantizer's ``transform_for_annotation``), running each pass's fast instance (`fast_passes`).

    Torch's own ``__call__`` runs them, in order, with its checks, recompiles and error messages.
    Its input's metadata is vouched for, as `PassPipeline` vouches for its input, so targeted
    passes fast-copy the untargeted nodes that stay vouched for; nodes an in-place pass
    edited, or whose inputs' values changed, replay as stock.
    """

    passes: list[Any]

    def __call__(self, module: Any) -> PassResult:
        if not isinstance(module, GraphModule) or not accelerated_ok("FastGraphModulePassManager"):
            return super().__call__(module)
        stock: list[Any] = list(self.passes)
        self.passes = fast_passes(stock)
        try:
            with pipeline_running():
                vouch_graph(module)
                return super().__call__(module)
        finally:
            self.passes = stock
