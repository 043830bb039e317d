"""The quantized layers of a pt2e-converted graph: where each layer's output is quantized.

A layer is the group of ops between dequantized inputs and one activation quantize (e.g.
``conv2d`` + ``relu``); it is named after the innermost module holding them all (``features.3``),
else its first op's module, or that op's node name at the root of the model.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass

import torch

from lowerkit.pass_infra.numerics.values import (
    DEQUANTIZE_OPS,
    QUANTIZE_OPS,
    is_op,
    module_path,
    op_label,
)

__all__ = ["QuantPoint", "quant_points", "shown_inputs"]


@dataclass(frozen=True)
class QuantPoint:
    """One quantized layer output."""

    name: str
    op: str
    #: The node whose output is quantized (the layer's last op) and the quantize node.
    node: str
    quantize: str
    scale: float
    zero_point: int
    #: The layer's ops (node names), first to last.
    group: tuple[str, ...]
    #: The innermost module holding the layer's ops (else its first op's; "" at the root).
    module: str
    #: The names of the layers whose quantized outputs feed this one.
    inputs: tuple[str, ...]
    #: The quantization levels of the output (256 for int8, 65536 for int16).
    levels: int = 256


def _group(last: torch.fx.Node) -> list[torch.fx.Node]:
    seen: dict[str, torch.fx.Node] = {}
    stack = [last]
    while stack:
        node = stack.pop()
        if node.name in seen or node.op != "call_function" or is_op(node, DEQUANTIZE_OPS | QUANTIZE_OPS):
            continue
        seen[node.name] = node
        stack.extend(a for a in node.all_input_nodes)
    order = {n.name: i for i, n in enumerate(last.graph.nodes)}
    return sorted(seen.values(), key=lambda n: order[n.name])


def _group_module(group: list[torch.fx.Node]) -> str:
    """The innermost module holding all the group's ops, else the first op's module ("" at the root)."""
    paths = [module_path(n).split(".") for n in group if module_path(n)]
    if not paths:
        return ""
    common: list[str] = []
    for parts in zip(*paths, strict=False):
        if len(set(parts)) != 1:
            break
        common.append(parts[0])
    if common and len(paths) == len(group):
        return ".".join(common)
    return module_path(group[0])


def _weighted(node: torch.fx.Node) -> bool:
    return any(kind in op_label(node) for kind in ("conv", "linear", "matmul", "bmm"))


def _own_module(group: list[torch.fx.Node], others: list[list[torch.fx.Node]]) -> str:
    """The group's module, unless it also holds another layer's conv / linear: then the first op's
    module (so that keeping the module in float keeps this layer, not its neighbours, in float)."""
    path = _group_module(group)
    prefix = path + "."
    if path and any(
        _weighted(n) and (module_path(n) == path or module_path(n).startswith(prefix)) for g in others for n in g
    ):
        return module_path(group[0])
    return path


def _feeding_quantizes(group: list[torch.fx.Node]) -> list[str]:
    names = {n.name for n in group}
    found = []
    for node in group:
        for arg in node.all_input_nodes:
            if arg.name in names or not is_op(arg, DEQUANTIZE_OPS):
                continue
            source = arg.args[0] if arg.args else None
            if isinstance(source, torch.fx.Node) and is_op(source, QUANTIZE_OPS):
                found.append(source.name)
    return found


def _levels(quantize: torch.fx.Node) -> int:
    """quant_max - quant_min + 1 of a quantize_per_tensor call (256 when they are not constants)."""
    low, high = (quantize.args[3], quantize.args[4]) if len(quantize.args) > 4 else (None, None)
    return int(high) - int(low) + 1 if isinstance(low, int) and isinstance(high, int) else 256


def quant_points(graph: torch.fx.Graph) -> list[QuantPoint]:
    """Every activation quantize of a converted graph whose input an op computed, in graph order."""
    raw = []
    for node in graph.nodes:
        if not is_op(node, QUANTIZE_OPS):
            continue
        source = node.args[0]
        if not isinstance(source, torch.fx.Node) or source.op != "call_function":
            continue  # a model input's quantize
        group = _group(source)
        if not group:
            continue
        raw.append((node, source, group))
    paths = [_own_module(g, [h for _, _, h in raw if h is not g]) for _, _, g in raw]
    counts = Counter(paths)
    by_quantize: dict[str, str] = {}
    points = []
    for (quantize, source, group), path in zip(raw, paths, strict=True):
        first = group[0]
        name = path if path and counts[path] == 1 else (f"{path}:{first.name}" if path else first.name)
        by_quantize[quantize.name] = name
        points.append((quantize, source, group, name, path))
    result = []
    for quantize, source, group, name, path in points:
        inputs = tuple(by_quantize[q] for q in _feeding_quantizes(group) if q in by_quantize)
        result.append(
            QuantPoint(
                name=name,
                op=op_label(group[0]),
                node=source.name,
                quantize=quantize.name,
                scale=float(quantize.args[1]),
                zero_point=int(quantize.args[2]),
                group=tuple(n.name for n in group),
                module=path,
                inputs=inputs,
                levels=_levels(quantize),
            )
        )
    return result


def shown_inputs(points: list[QuantPoint], shown: set[str]) -> dict[str, tuple[str, ...]]:
    """Each point's nearest upstream points among `shown`, looking through the ones not shown."""
    nearest: dict[str, tuple[str, ...]] = {}  # points come in graph order: inputs are resolved first
    for point in points:
        found: list[str] = []
        for source in point.inputs:
            found += [source] if source in shown else list(nearest.get(source, ()))
        nearest[point.name] = tuple(dict.fromkeys(found))
    return nearest
