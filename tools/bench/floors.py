"""Stage floors: an estimate, per stage of a lowering, of the work no lowering can skip, in the same process.

`bench.realworld` measures them on lowerkit's drop-in side, around and after its timed flow, so a
stage's time can be read as a multiple of its floor (`bench.floor_table`). `FloorProbe.hooks()`
wraps, while the flow runs, the calls that are a floor themselves (only a clock around each; nothing
they do changes); `FloorProbe.measure()`, after the flow and off its clock, re-runs alone what can be
re-run. What each stage's floor is: `FLOOR_DEFINITIONS` (the generated table states them).

A no-op walk touches each node's op, target, args, kwargs, users and ``meta["val"]``; its per-node cost
is measured on the floor's export and scaled to the other graphs' node counts.
"""

from __future__ import annotations

import contextlib
import functools
import time
from collections.abc import Callable, Iterator, Sequence
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from bench.realworld_flows import Lowered

__all__ = ["FLOOR_DEFINITIONS", "FLOOR_STAGES", "FloorProbe", "Timers", "graph_walk_seconds"]

#: The stages that get a floor, in flow order.
FLOOR_STAGES = ("export", "quantize", "re-export", "to_edge_transform_and_lower", "to_executorch")

#: Each stage's floor, as the generated table states it.
FLOOR_DEFINITIONS = {
    "export": "the export itself (the `torch.export` call cannot be skipped): the stage, or a plain "
              "`torch.export.export` of the same module re-run after the flow (warm) if faster",
    "quantize": "the eager module's forward passes over the calibration batches, plus one no-op walk over "
                "the exported graph",
    "re-export": "one no-op walk over the re-exported graph",
    "to_edge_transform_and_lower": "the backend's compiler / serializer timed in the run (Arm: every "
                                   "`TosaSerializer` call, and Ethos-U's `vela_compile`; Core ML: coremltools' "
                                   "MIL backend `load`, MIL program to spec and weights), plus one no-op walk "
                                   "over the lowering's input graph per `torch.fx` pass that changed something",
    "to_executorch": "ExecuTorch's emit + serialization (`ExecutorchProgramManager.__init__` and `.buffer`), "
                     "timed in the run",
}  # fmt: skip


class Timers:
    """Inclusive wall seconds and calls per bucket; a call nested in one of its own bucket counts once."""

    def __init__(self) -> None:
        self.seconds: dict[str, float] = {}
        self.calls: dict[str, int] = {}
        self._open: dict[str, int] = {}

    def timed(self, bucket: str, fn: Callable[..., Any]) -> Callable[..., Any]:
        """`fn`, its time added to `bucket`."""

        @functools.wraps(fn)
        def wrapper(*args: Any, **kwargs: Any) -> Any:
            if self._open.get(bucket):
                return fn(*args, **kwargs)
            self._open[bucket] = 1
            start = time.perf_counter()
            try:
                return fn(*args, **kwargs)
            finally:
                self.seconds[bucket] = self.seconds.get(bucket, 0.0) + time.perf_counter() - start
                self.calls[bucket] = self.calls.get(bucket, 0) + 1
                self._open[bucket] = 0

        return wrapper

    def inside(self, bucket: str) -> bool:
        """True while a call of `bucket` runs."""
        return bool(self._open.get(bucket))


@contextlib.contextmanager
def _swapped(owner: Any, name: str, value: Any) -> Iterator[None]:
    """``owner.name`` is `value` within the block, then what it was (the attribute's own, not inherited)."""
    had = name in vars(owner)
    old = vars(owner).get(name)
    setattr(owner, name, value)
    try:
        yield
    finally:
        if had:
            setattr(owner, name, old)
        else:
            delattr(owner, name)


def _walk(graph: Any) -> int:
    """A no-op walk: what any pass reads of each node."""
    seen = 0
    for node in graph.nodes:
        touched = (node.op, node.target, node.args, node.kwargs, len(node.users), node.meta.get("val"))
        seen += touched is not None
    return seen


def _pass_classes(base: type) -> list[type]:
    """`base` and its loaded subclasses that define their own ``__call__`` (``ArmPass`` does)."""
    found, todo, seen = [], [base], set()
    while todo:
        cls = todo.pop()
        if cls in seen:
            continue
        seen.add(cls)
        if "__call__" in vars(cls):
            found.append(cls)
        todo.extend(cls.__subclasses__())
    return found


def graph_walk_seconds(graph: Any, repeat: int = 3) -> float:
    """The fastest of `repeat` no-op walks over `graph`."""
    best = float("inf")
    for _ in range(repeat):
        start = time.perf_counter()
        _walk(graph)
        best = min(best, time.perf_counter() - start)
    return best


class FloorProbe:
    """Floors of one drop-in lowering: `hooks()` around the timed flow, then `measure()` off its clock."""

    def __init__(self, coreml: bool) -> None:
        self.coreml = coreml
        self.timers = Timers()
        self.changed_passes = 0
        self._pass_depth = 0
        self._subject: tuple[Any, tuple[Any, ...], Sequence[tuple[Any, ...]]] | None = None

    def about(self, module: Any, inputs: tuple[Any, ...], calibration: Sequence[tuple[Any, ...]]) -> None:
        """The model the flow lowers (what `measure` re-runs)."""
        self._subject = (module, inputs, calibration)

    def _counting(self, call: Callable[..., Any]) -> Callable[..., Any]:
        """A pass class's ``__call__``, counting top-level passes that report a change inside the lowering."""

        @functools.wraps(call)
        def wrapper(pass_: Any, *args: Any, **kwargs: Any) -> Any:
            if self._pass_depth:
                return call(pass_, *args, **kwargs)
            self._pass_depth += 1
            try:
                result = call(pass_, *args, **kwargs)
            finally:
                self._pass_depth -= 1
            if self.timers.inside("to_edge_transform_and_lower") and getattr(result, "modified", False):
                self.changed_passes += 1
            return result

        return wrapper

    @contextlib.contextmanager
    def hooks(self) -> Iterator[None]:
        """Within the block, the floor calls are timed (a clock around each; see the module docstring)."""
        import executorch.exir
        from executorch.exir import ExecutorchProgramManager
        from torch.fx.passes.infra.pass_base import PassBase

        t = self.timers
        swaps: list[tuple[Any, str, Any]] = [
            (executorch.exir, "to_edge_transform_and_lower",
             t.timed("to_edge_transform_and_lower", executorch.exir.to_edge_transform_and_lower)),
            *((cls, "__call__", self._counting(vars(cls)["__call__"])) for cls in _pass_classes(PassBase)),
            (ExecutorchProgramManager, "__init__", t.timed("emit + serialize", ExecutorchProgramManager.__init__)),
            (ExecutorchProgramManager, "buffer",
             property(t.timed("emit + serialize", ExecutorchProgramManager.buffer.fget))),
        ]  # fmt: skip
        if self.coreml:
            import coremltools
            from coremltools.converters.mil.backend.mil import load as mil_backend

            swaps.append((mil_backend, "load", t.timed("coreml serializer", mil_backend.load)))
            swaps.append((coremltools, "convert", t.timed("coremltools.convert", coremltools.convert)))  # a detail
        else:
            import tosa_serializer
            from executorch.backends.arm.ethosu import backend as ethosu_backend

            serializer = tosa_serializer.TosaSerializer
            for name, value in list(vars(serializer).items()):
                if isinstance(value, staticmethod):
                    swaps.append((serializer, name, staticmethod(t.timed("tosa serializer", value.__func__))))
                elif callable(value) and not name.startswith("_"):
                    swaps.append((serializer, name, t.timed("tosa serializer", value)))
            swaps.append((ethosu_backend, "vela_compile", t.timed("vela", ethosu_backend.vela_compile)))
        with contextlib.ExitStack() as stack:
            for owner, name, value in swaps:
                stack.enter_context(_swapped(owner, name, value))
            yield

    def measure(self, lowered: Lowered) -> dict[str, Any]:
        """``floors`` (seconds per stage of `lowered`, None where not measured) and ``floor_parts``."""
        import torch

        if self._subject is None:
            raise RuntimeError("FloorProbe.about() was not called")
        module, inputs, calibration = self._subject
        start = time.perf_counter()
        program = torch.export.export(module, inputs)
        export_s = time.perf_counter() - start
        walk_s = graph_walk_seconds(program.graph)
        per_node = walk_s / max(len(program.graph.nodes), 1)
        input_nodes = lowered.lowering_input_nodes or len(program.graph.nodes)
        input_walk_s = per_node * input_nodes
        parts: dict[str, Any] = {
            "export_alone": export_s, "graph_walk": walk_s, "export_nodes": len(program.graph.nodes),
            "lowering_input_nodes": input_nodes, "lowering_input_walk": input_walk_s,
            "changed_passes": self.changed_passes,
            **{f"{bucket} s": s for bucket, s in self.timers.seconds.items() if bucket != "to_edge_transform_and_lower"},
        }  # fmt: skip
        floors: dict[str, float | None] = {"export": min(export_s, lowered.stages.get("export", export_s))}
        if "quantize" in lowered.stages:
            start = time.perf_counter()
            with torch.no_grad():
                for batch in calibration:
                    module(*batch)
            parts["calibration_forward"] = time.perf_counter() - start
            floors["quantize"] = parts["calibration_forward"] + walk_s
        if "re-export" in lowered.stages:
            floors["re-export"] = input_walk_s
        buckets = ("coreml serializer",) if self.coreml else ("tosa serializer", "vela")
        backend_s = sum(self.timers.seconds.get(b, 0.0) for b in buckets)
        floors["to_edge_transform_and_lower"] = (
            backend_s + self.changed_passes * input_walk_s if backend_s else None
        )  # none: the serializer was never seen, so the floor was not measured
        floors["to_executorch"] = self.timers.seconds.get("emit + serialize")
        return {"floors": {s: floors.get(s) for s in FLOOR_STAGES if s in lowered.stages}, "floor_parts": parts}
