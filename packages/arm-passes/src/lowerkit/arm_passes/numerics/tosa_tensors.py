"""The TOSA reference model's intermediate tensors, and which torch node each one computes.

The reference model returns only a graph's outputs, so the flatbuffer is re-serialized (with
tosa-tools' serializer) with the wanted intermediate tensors added as outputs: the operators,
constants and tensors are unchanged, so the values are those the shipped flatbuffer computes.
The graph the flatbuffer was serialized from (captured after the Arm pass pipeline) names each
tensor; its nodes' ``from_node`` provenance leads to the nodes of the program that was lowered,
and its TRANSPOSE ops tell each tensor's layout (NHWC inside, NCHW in torch).

A layout change (a TRANSPOSE; a RESHAPE where only 1-element axes move, as at 1x1 spatial)
keeps the provenance of the op the pipeline made it for, also where a later pass moved it past
the ops that follow (``RemovePermutesAroundElementwiseOps``: a conv's output transpose after the
residual add and ReLU, before a flatten or the graph's output): its values are then those ops'
results, not the conv's. So a TRANSPOSE or RESHAPE that names only ops an earlier tensor already
computes is taken for what it holds, its input's values (a torch permute's or view's names the
permute or view, which no earlier tensor computes, and keeps it).
"""

from __future__ import annotations

import itertools
import os
import tempfile
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch

from lowerkit.arm_passes.reference import native_stdout_to_stderr, run_tosa_reference

__all__ = ["TosaTensor", "drop_reordered", "read_intermediates", "tosa_tensors"]


@dataclass(frozen=True)
class TosaTensor:
    """One tensor of the TOSA graph."""

    name: str
    shape: tuple[int, ...]
    dtype: torch.dtype
    #: The names of the lowered program's nodes it comes from.
    sources: frozenset[str]
    #: For each of its axes, the torch axis it holds (identity outside NHWC regions).
    axes: tuple[int, ...]

    def to_torch_layout(self, array: np.ndarray, shape: Sequence[int], like: Any = None) -> np.ndarray | None:
        """The tensor's values in torch's layout and `shape`, or None if they do not fit.

        The graph's TRANSPOSE ops give the layout, but a torch permute changes the layout the
        torch value has: where `like` (the torch value) is given and another ordering of the axes
        also fits `shape`, the ordering closest to `like` is taken.
        """
        value = np.asarray(array).reshape(self.shape)
        candidates = [np.transpose(value, np.argsort(self.axes))] if value.ndim == len(self.axes) else [value]
        if like is not None and 1 < value.ndim <= 4:
            candidates += [np.transpose(value, order) for order in itertools.permutations(range(value.ndim))]
        fitting = [c for c in candidates if tuple(c.shape) == tuple(shape)]
        if not fitting:
            return value.reshape(tuple(shape)) if value.size == int(np.prod(shape)) else None
        if like is None or len(fitting) == 1:
            return fitting[0]
        reference = np.asarray(like, dtype=np.float64)
        return min(fitting, key=lambda c: float(np.abs(c.astype(np.float64) - reference).max()))


def _sources(provenance: Sequence[Any]) -> set[str]:
    found: set[str] = set()
    for source in provenance:
        if source.from_node:
            found |= _sources(source.from_node)
        else:
            found.add(source.name)
    return found


def _is_transpose(node: torch.fx.Node) -> bool:
    return "TRANSPOSE" in str(getattr(node.target, "__name__", node.target))


def _is_reshape(node: torch.fx.Node) -> bool:
    return "RESHAPE" in str(getattr(node.target, "__name__", node.target))


def _in_torch_order(axes: tuple[int, ...], shape: Sequence[int]) -> bool:
    """Whether a tensor's elements are in torch's order: its axes of more than one element are."""
    kept = [axis for axis, size in zip(axes, shape, strict=True) if size != 1]
    return kept == sorted(kept)


def tosa_tensors(graph_module: torch.fx.GraphModule) -> list[TosaTensor]:
    """The tensor-valued nodes of a post-pipeline Arm graph, in graph order."""
    axes_of: dict[str, tuple[int, ...] | None] = {}
    sources_of: dict[str, frozenset[str]] = {}
    computed: set[str] = set()  # the sources of the tensors found so far
    found = []
    for node in graph_module.graph.nodes:
        value = node.meta.get("val")
        if not isinstance(value, torch.Tensor):
            continue
        rank = value.dim()
        axes: tuple[int, ...] | None = tuple(range(rank))
        first = next((a for a in node.all_input_nodes if a.name in axes_of), None)
        if node.op == "call_function" and first is not None:
            before = axes_of[first.name]
            if before is None:
                axes = None
            elif _is_transpose(node):
                axes = tuple(before[p] for p in node.args[1])
            elif _is_reshape(node):
                # A reshape keeps torch's element order only if its input was in torch's order
                # (where only 1-element axes are out of place, as at 1x1 spatial, it is).
                axes = axes if _in_torch_order(before, first.meta["val"].shape) else None
            elif len(before) == rank:
                axes = before
        axes_of[node.name] = axes
        sources = frozenset(_sources(node.meta.get("from_node", [])))
        if (_is_transpose(node) or _is_reshape(node)) and first is not None and sources <= computed:
            sources = sources_of[first.name]  # a layout change: it holds its input's values
        sources_of[node.name] = sources
        if node.op != "call_function" or axes is None:
            continue
        computed.update(sources)
        found.append(TosaTensor(node.name, tuple(value.shape), value.dtype, sources, axes))
    return found


def drop_reordered(
    chosen: dict[str, TosaTensor], inputs: Mapping[str, Sequence[str]], tensors: Sequence[TosaTensor]
) -> list[str]:
    """Drop (and return) the keys whose tensor the pipeline computes before one of its inputs'.

    A pass may move an op past another (e.g. a ReLU after the reshape that follows it): the
    reshape's tensor then holds the value before the ReLU, not the torch node's value.
    """
    position = {t.name: i for i, t in enumerate(tensors)}
    dropped = [
        key
        for key, tensor in chosen.items()
        if any(a in chosen and position[chosen[a].name] > position[tensor.name] for a in inputs.get(key, ()))
    ]
    for key in dropped:
        del chosen[key]
    return dropped


def read_intermediates(flatbuffer: bytes, feeds: Sequence[np.ndarray], names: Sequence[str]) -> dict[str, Any]:
    """Run `flatbuffer` on the reference model and return the tensors called `names`.

    The graph's own outputs are returned too, under the key ``""`` (a list), so a caller can
    check the re-serialized graph computes what the shipped one does.
    """
    import tosa_serializer as ts

    with tempfile.TemporaryDirectory() as folder:
        path = os.path.join(folder, "graph.tosa")
        with open(path, "wb") as out:
            out.write(flatbuffer)
        serializer = ts.TosaSerializer("")
        with native_stdout_to_stderr():  # it prints a version notice
            loaded = serializer.loadTosaFlatbuffer(path)
        if not loaded:
            raise ValueError("tosa-tools could not read the TOSA flatbuffer")
    block = serializer.regions[0].basicBlocks[0]
    outputs = list(block.outputs)
    originals = len(outputs)
    for name in names:
        if name not in outputs:
            block.addOutput(name)
            outputs.append(name)
    raw = run_tosa_reference(bytes(serializer.serialize()), feeds)
    found: dict[str, Any] = {name: np.asarray(raw[outputs.index(name)]) for name in names}
    found[""] = [np.asarray(array) for array in raw[:originals]]
    return found
