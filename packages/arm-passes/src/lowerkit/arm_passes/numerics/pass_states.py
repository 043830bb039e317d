"""Snapshots of the Arm pass pipeline's graph after each pass, runnable later on real tensors."""

from __future__ import annotations

import copy
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

import torch
from torch.export import ExportedProgram
from torch.export.graph_signature import InputKind
from torch.fx import GraphModule

from lowerkit.arm_passes.runner import capture_pass_states

__all__ = ["PassState", "record_pass_states", "same_signature", "signature"]

#: Node meta the passes may edit in place (copied per snapshot; the rest is shared).
_OWNED_META = ("input_qparams", "output_qparams")


@dataclass(frozen=True)
class PassState:
    """The pipeline's graph after pass number `index` (0: the pipeline's input, `name` "")."""

    index: int
    name: str
    #: A copy of the graph (nodes and the qparams meta copied, the rest of the meta shared).
    graph: torch.fx.Graph = field(repr=False)
    #: The module the graph's get_attr nodes resolve in (the pipeline's live graph module).
    root: torch.nn.Module = field(repr=False)
    #: Placeholder name -> value, for every placeholder that is not a user input.
    constants: dict[str, torch.Tensor] = field(repr=False)
    #: The user-input placeholders, in order.
    user_inputs: tuple[str, ...]
    #: The index of an earlier state this one is identical to (the pass changed nothing the
    #: interpreter reads: nodes, arguments, qparams, value dtypes, constants), else None.
    same_as: int | None = None

    @property
    def label(self) -> str:
        """The pass's name and position, e.g. "InsertRescalePass (#97)"."""
        return f"{self.name} (#{self.index})" if self.name else "pipeline input"


def _copy_graph(graph_module: GraphModule) -> torch.fx.Graph:
    """A copy of the graph, without generating its code (an Interpreter runs it node by node)."""
    graph = torch.fx.Graph()
    mapping: dict[torch.fx.Node, torch.fx.Node] = {}
    out = graph.graph_copy(graph_module.graph, mapping)
    graph.output(out)
    for old, new in mapping.items():
        new.meta = dict(old.meta)
        for key in _OWNED_META:
            if key in old.meta:
                new.meta[key] = copy.deepcopy(old.meta[key])
    output = next(n for n in graph_module.graph.nodes if n.op == "output")
    new_output = next(n for n in graph.nodes if n.op == "output")
    new_output.meta = {k: copy.deepcopy(v) if k in _OWNED_META else v for k, v in output.meta.items()}
    return graph


def _same(a: dict[str, torch.Tensor], b: dict[str, torch.Tensor]) -> bool:
    """The same constants: the same copies (a copy is shared while its tensor is unchanged)."""
    return a.keys() == b.keys() and all(a[k] is b[k] for k in a)


class _ConstantCopies:
    """Copies of the program's constants, shared between snapshots while a tensor is unchanged."""

    def __init__(self) -> None:
        self._copies: dict[int, tuple[torch.Tensor, torch.Tensor]] = {}

    def copy_of(self, tensor: torch.Tensor) -> torch.Tensor:
        known = self._copies.get(id(tensor))
        if known is not None and known[0] is tensor and torch.equal(known[1], tensor):
            return known[1]
        snapshot = tensor.detach().clone()
        self._copies[id(tensor)] = (tensor, snapshot)
        return snapshot


def _constants(program: ExportedProgram, copies: _ConstantCopies) -> tuple[dict[str, torch.Tensor], tuple[str, ...]]:
    values: dict[str, torch.Tensor] = {}
    users: list[str] = []
    for spec in program.graph_signature.input_specs:
        name = getattr(spec.arg, "name", None)
        if name is None:
            continue
        if spec.kind == InputKind.USER_INPUT:
            users.append(name)
            continue
        source: Any = program.constants if spec.kind == InputKind.CONSTANT_TENSOR else program.state_dict
        value = source.get(spec.target) if spec.target is not None else None
        if value is None and spec.target is not None:
            value = program.constants.get(spec.target, program.state_dict.get(spec.target))
        if isinstance(value, torch.Tensor):
            values[name] = copies.copy_of(value)
    return values, tuple(users)


def signature(graph: torch.fx.Graph) -> list[tuple[Any, ...]]:
    """What the interpreter reads of each node, by object: the node, its target, arguments,
    qparams and value. Passes replace these objects when they change them (``update_arg``, new
    ``QuantArgs``, a retrace), so `same_signature` compares them by identity (cheap); the rows
    hold the objects, so an identity cannot be reused by a new object while they are compared.
    """
    rows: list[tuple[Any, ...]] = []
    for node in graph.nodes:
        iq = node.meta.get("input_qparams") or {}
        oq = node.meta.get("output_qparams") or {}
        rows.append((
            node, node.name, node.target, node.args, node.kwargs, tuple(iq.items()), tuple(oq.items()),
            node.meta.get("val"),
        ))
    return rows


def same_signature(a: list[tuple[Any, ...]], b: list[tuple[Any, ...]]) -> bool:
    """Whether two signatures hold the same objects (names, targets and qparam indices compared by value)."""
    if len(a) != len(b):
        return False
    for x, y in zip(a, b, strict=True):
        if x[0] is not y[0] or x[1] != y[1] or x[2] != y[2] or x[3] is not y[3] or x[4] is not y[4]:
            return False
        if x[7] is not y[7] or not _same_items(x[5], y[5]) or not _same_items(x[6], y[6]):
            return False
    return True


def _same_items(a: tuple[Any, ...], b: tuple[Any, ...]) -> bool:
    return len(a) == len(b) and all(k1 == k2 and v1 is v2 for (k1, v1), (k2, v2) in zip(a, b, strict=True))


@contextmanager
def record_pass_states(sink: list[PassState]) -> Iterator[None]:
    """Append a PassState for the pipeline's input and after every pass FastArmPassManager runs here."""
    copies = _ConstantCopies()
    last: list[Any] = []

    def observe(name: str, program: ExportedProgram, graph_module: GraphModule) -> None:
        constants, users = _constants(program, copies)
        rows = signature(graph_module.graph)
        previous = sink[-1] if sink and name else None  # name "": a pipeline starts, nothing to compare
        if previous is not None and same_signature(rows, last[0]) and _same(constants, previous.constants):
            same = previous.same_as if previous.same_as is not None else previous.index
            sink.append(PassState(len(sink), name, previous.graph, previous.root, previous.constants, users, same))
            return
        last[:] = [rows]
        sink.append(PassState(len(sink), name, _copy_graph(graph_module), graph_module, constants, users))

    with capture_pass_states(observe):
        yield
