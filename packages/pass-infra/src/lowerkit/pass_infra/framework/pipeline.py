"""PassPipeline: run ExportPasses in order, fast, with a per-pass report and optional verify."""

from __future__ import annotations

import copy
import json
import operator
import time
from collections.abc import Callable, Collection, Iterator, Sequence
from contextlib import ExitStack, contextmanager
from dataclasses import asdict, dataclass
from typing import Any

from torch.fx import GraphModule
from torch.fx.node import map_arg
from torch.fx.passes.infra.pass_base import PassResult

from lowerkit.pass_infra.accelerations.cheaper_replay import cheaper_replay
from lowerkit.pass_infra.accelerations.fake_cache import EXECUTORCH_NAMESPACES, faketensor_cache
from lowerkit.pass_infra.accelerations.patching import lowering_lock, suspend_all
from lowerkit.pass_infra.accelerations.replay_engine import pipeline_running, vouch_graph
from lowerkit.pass_infra.errors import PassEquivalenceError, PassInfraError
from lowerkit.pass_infra.framework.compare import first_difference
from lowerkit.pass_infra.framework.op_matching import count_nodes, graph_modules
from lowerkit.pass_infra.framework.targeted_pass import reference_copy

__all__ = ["PassPipeline", "PassRecord", "PipelineReport", "pass_name"]

PassLike = Callable[[GraphModule], Any]
#: A graph's node count and, when the pipeline tracks changes, its `_fingerprint`.
_State = tuple[int, "list[Any] | None"]


@dataclass(frozen=True)
class PassRecord:
    """One pass's row in a PipelineReport."""

    name: str
    ran: bool
    wall_ms: float
    nodes_before: int
    nodes_after: int
    #: Whether the graph differs after the pass (ops, names, targets, arguments); None when the
    #: pipeline ran with ``track_changes=False``.
    changed: bool | None
    verified: bool = False


@dataclass(frozen=True)
class PipelineReport:
    """Per-pass outcome of a PassPipeline run: ran or skipped, wall ms, nodes, changed."""

    rows: tuple[PassRecord, ...]

    @property
    def total_ms(self) -> float:
        """Sum of the passes' wall times."""
        return sum(r.wall_ms for r in self.rows)

    def table(self) -> str:
        """A fixed-width text table, one line per pass plus a total."""
        width = max([len("pass"), *(len(r.name) for r in self.rows)])
        lines = [
            f"{'#':>3}  {'pass':<{width}}  {'status':<7}  {'ms':>9}  {'nodes':>11}  changed",
        ]
        for i, r in enumerate(self.rows):
            status = ("ran" if r.ran else "skipped") + ("*" if r.verified else "")
            nodes = f"{r.nodes_before}->{r.nodes_after}"
            lines.append(
                f"{i:>3}  {r.name:<{width}}  {status:<7}  {r.wall_ms:>9.2f}  {nodes:>11}  "
                f"{_yes_no(r.changed)}"
            )
        ran = sum(r.ran for r in self.rows)
        lines.append(
            f"     {'total':<{width}}  {ran:>3}/{len(self.rows):<3}  {self.total_ms:>9.2f}"
        )
        return "\n".join(lines)

    def to_json(self) -> str:
        """The report as JSON: {"passes": [row, ...], "total_ms": ...}, keys sorted."""
        return json.dumps(
            {"passes": [asdict(r) for r in self.rows], "total_ms": self.total_ms},
            sort_keys=True,
            indent=2,
        )


def pass_name(pass_: Any) -> str:
    """A pass's display name: its class name (instances) or __name__ (functions)."""
    if isinstance(pass_, type):
        return pass_.__name__
    name = getattr(pass_, "__name__", None)
    return name if isinstance(name, str) else type(pass_).__name__


def _yes_no(changed: bool | None) -> str:
    return "-" if changed is None else "yes" if changed else "no"


def _fingerprint(graph_module: GraphModule) -> list[Any]:
    """Each node's op, name, target and arguments (nodes by name): equal before and after an unchanged pass."""
    return [
        (n.op, n.name, n.target, map_arg(n.args, _node_name), map_arg(n.kwargs, _node_name))
        for gm in graph_modules(graph_module)
        for n in gm.graph.nodes
    ]


def _differs(a: list[Any], b: list[Any]) -> bool:
    try:
        return bool(a != b)
    except Exception:  # an argument whose == is not a bool (a tensor): call it changed
        return True


_node_name = operator.attrgetter("name")


def _result_graph(result: Any, graph_module: GraphModule) -> GraphModule:
    if isinstance(result, PassResult):
        graph: GraphModule = result.graph_module
        return graph
    if isinstance(result, GraphModule):
        return result
    if result is None:
        return graph_module
    raise PassInfraError(
        f"a pass returned {type(result).__name__}; passes must return a PassResult, a "
        "GraphModule or None (in-place)"
    )


def _wants_run(pass_: Any, graph_module: GraphModule) -> tuple[bool, bool]:
    """(call it, it will do work): skip ours via should_run; ArmPass reports should_run_pass."""
    should = getattr(pass_, "should_run", None)
    if callable(should):
        ok = bool(should(graph_module))
        return ok, ok
    should_arm = getattr(pass_, "should_run_pass", None)
    if callable(should_arm):
        return True, bool(should_arm(graph_module))
    return True, True


class PassPipeline:
    """An ordered, named list of ExportPasses run with cheaper replay and a wider FakeTensor cache."""

    def __init__(
        self,
        passes: Sequence[PassLike],
        *,
        verify: bool = False,
        cheap_replay: bool = True,
        cache_namespaces: Collection[str] | None = EXECUTORCH_NAMESPACES,
        track_changes: bool = True,
    ) -> None:
        """`track_changes`: fill each row's ``changed`` by snapshotting the whole graph after every
        pass that ran (4 % of a 16-layer LLM's export to TOSA); without it ``changed`` is None."""
        for p in passes:
            if isinstance(p, type):
                raise PassInfraError(
                    f"PassPipeline got the class {p.__name__}, not an instance; write {p.__name__}(...)"
                )
            if not callable(p):
                raise PassInfraError(f"PassPipeline got {p!r}, which is not a pass (not callable)")
        self.passes: tuple[PassLike, ...] = tuple(passes)
        self.verify = verify
        self.cheap_replay = cheap_replay
        self.cache_namespaces = None if cache_namespaces is None else frozenset(cache_namespaces)
        self.track_changes = track_changes

    @property
    def names(self) -> list[str]:
        """The passes' names, in order."""
        return [pass_name(p) for p in self.passes]

    def __str__(self) -> str:
        return "PassPipeline([\n" + "".join(f"  {n},\n" for n in self.names) + "])"

    @contextmanager
    def scope(self) -> Iterator[None]:
        """The speed-ups this pipeline applies (cheaper replay, FakeTensor cache), as one block."""
        with ExitStack() as stack:
            if self.cheap_replay:
                stack.enter_context(cheaper_replay())
            if self.cache_namespaces:
                stack.enter_context(faketensor_cache(self.cache_namespaces))
            yield

    def run(self, graph_module: GraphModule) -> tuple[GraphModule, PipelineReport]:
        """Run every pass in order; return the final graph module and the report.

        Holds the process-wide lowering lock: pipelines in several threads run one at a time.
        """
        with lowering_lock():
            return self._run(graph_module)

    def _run(self, graph_module: GraphModule) -> tuple[GraphModule, PipelineReport]:
        rows: list[PassRecord] = []
        state = self._state(graph_module)
        # The input's metadata is taken as consistent (as every ExportPass assumes);
        # from here on only nodes the replays create, and that stay unchanged, are.
        vouch_graph(graph_module)
        edited_in_place = False
        with pipeline_running(), _nothing() if self.verify else self.scope():
            for p in self.passes:
                previous = graph_module
                graph_module, state = self._run_one(p, graph_module, state, rows)
                if graph_module is not previous:
                    edited_in_place = False  # a replay's module: its code is built (or lazy) from its graph
                elif rows[-1].ran:
                    edited_in_place = True
        if edited_in_place:
            # A pass that edits the graph in place leaves the code stale (PassManager would
            # have recompiled after it): generate it once, here (lazily for a lazy module).
            graph_module.recompile()
        # A replay's module generates its code on first use (forward, .code, pickling), as the
        # backend that reads only its graph never asks for it.
        return graph_module, PipelineReport(tuple(rows))

    def _state(self, graph_module: GraphModule) -> _State:
        return count_nodes(graph_module), (_fingerprint(graph_module) if self.track_changes else None)

    def _run_one(
        self,
        pass_: PassLike,
        gm: GraphModule,
        state: _State,
        rows: list[PassRecord],
    ) -> tuple[GraphModule, _State]:
        name = pass_name(pass_)
        before, fingerprint = state
        reference: tuple[Any, GraphModule] | None = None
        if self.verify:
            with suspend_all():  # stock: no lowerkit patch, whatever scope the caller holds
                reference = (reference_copy(pass_), copy.deepcopy(gm))
        start = time.perf_counter()
        with self.scope() if self.verify else _nothing():
            call, works = _wants_run(pass_, gm)
            result = pass_(gm) if call else None
        wall_ms = (time.perf_counter() - start) * 1000.0
        new_gm = _result_graph(result, gm)
        after = state if not call else self._state(new_gm)
        if reference is not None:
            ref_pass, ref_gm = reference
            with suspend_all():
                ref_out = _result_graph(ref_pass(ref_gm), ref_gm)
            diff = first_difference(ref_out, new_gm)
            if diff is not None:
                raise PassEquivalenceError(name, diff.node, diff.detail)
        rows.append(
            PassRecord(
                name=name,
                ran=works,
                wall_ms=round(wall_ms, 3),
                nodes_before=before,
                nodes_after=after[0],
                changed=None if fingerprint is None or after[1] is None else _differs(after[1], fingerprint),
                verified=reference is not None,
            )
        )
        return new_gm, after


@contextmanager
def _nothing() -> Iterator[None]:
    yield
