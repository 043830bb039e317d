"""Run a graph from the middle of the Arm pass pipeline on real tensors, qparams included.

After ``FoldAndAnnotateQParamsPass`` an aten op takes and makes integer tensors and keeps its
quantization only in ``node.meta["input_qparams"]`` / ``["output_qparams"]`` (``QuantArgs``):
such a node is run as its fake-quantized twin (dequantize the annotated inputs with the
quantized_decomposed ops, run the op in float, quantize the output: the same ops, so the
same rounding, as the fake-quant program). Int32 qparams (after ``InsertRescaleInt32Pass``)
are dequantized and computed in float64, exact for int32 values. Ops without qparams run as
they are (views, permutes, q/dq nodes). TOSA dialect ops run through ``tosa_torch`` where it
has them, else through ExecuTorch's real (reference-model) kernel; an op with neither raises
``NotImplementedError`` naming it.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import torch

from lowerkit.arm_passes.numerics.tosa_torch import TOSA_IN_TORCH, tosa_name

__all__ = ["QParamInterpreter", "run_graph"]

_QDQ = ("quantized_decomposed::", "quantized_decomposed.")


def _is_qdq(target: Any) -> bool:
    name = str(getattr(target, "_name", None) or getattr(target, "__name__", "") or target)
    return name.startswith(_QDQ)


def _dequantize(value: Any, qparams: Any, wide: bool) -> Any:
    if isinstance(value, list | tuple):
        return type(value)(_dequantize(v, qparams, wide) for v in value)
    if not isinstance(value, torch.Tensor) or value.dtype.is_floating_point:
        return value
    if qparams.per_channel:
        scale = torch.tensor(qparams.scale, dtype=torch.float64)
        zp = torch.tensor(qparams.zp, dtype=torch.float64)
        shape = [1] * value.dim()
        shape[qparams.axis] = -1
        result = (value.double() - zp.view(shape)) * scale.view(shape)
        return result if wide else result.float()
    if wide:
        return (value.double() - float(qparams.zp)) * float(qparams.scale)
    return torch.ops.quantized_decomposed.dequantize_per_tensor(
        value, float(qparams.scale), int(qparams.zp), int(qparams.qmin), int(qparams.qmax), value.dtype
    )


def _quantize(value: torch.Tensor, qparams: Any, wide: bool) -> torch.Tensor:
    if wide or value.dtype == torch.float64:
        q = torch.round(value.double() / float(qparams.scale)) + float(qparams.zp)
        return torch.clamp(q, int(qparams.qmin), int(qparams.qmax)).to(qparams.dtype)
    return torch.ops.quantized_decomposed.quantize_per_tensor(
        value.float(), float(qparams.scale), int(qparams.zp), int(qparams.qmin), int(qparams.qmax), qparams.dtype
    )


def _wide(node: torch.fx.Node) -> bool:
    """Whether the node's quantized arithmetic needs float64 (int32 activations)."""
    out = node.meta.get("output_qparams") or {}
    return any(q.dtype == torch.int32 for q in out.values())


class QParamInterpreter(torch.fx.Interpreter):
    """A torch.fx.Interpreter for the Arm backend's intermediate graphs (see module doc)."""

    def run_node(self, n: torch.fx.Node) -> Any:
        if n.op != "call_function":
            return super().run_node(n)
        args, kwargs = self.fetch_args_kwargs_from_env(n)
        name = tosa_name(n.target)
        if name is not None:
            return self._tosa(n, name, args, kwargs)
        inputs = n.meta.get("input_qparams") or {}
        outputs = n.meta.get("output_qparams") or {}
        if _is_qdq(n.target) or not (inputs or outputs):
            return n.target(*args, **kwargs)
        wide = _wide(n)
        floats = list(args)
        for index, qparams in inputs.items():
            if index < len(floats):
                floats[index] = _dequantize(floats[index], qparams, wide)
        result = n.target(*floats, **kwargs)
        if 0 in outputs and isinstance(result, torch.Tensor):
            return _quantize(result, outputs[0], wide)
        return result

    def _tosa(self, n: torch.fx.Node, name: str, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
        mine = TOSA_IN_TORCH.get(name)
        if mine is not None:
            return mine(n, args, kwargs)
        try:
            return n.target(*args, **kwargs)
        except Exception as error:
            raise NotImplementedError(
                f"tosa.{name} ({n.name}) cannot be evaluated: ExecuTorch has no real kernel it can run "
                f"outside the graph ({type(error).__name__}: {str(error)[:200]}); add it to tosa_torch.TOSA_IN_TORCH"
            ) from error


def run_graph(
    graph_module: torch.fx.GraphModule,
    constants: Mapping[str, torch.Tensor],
    user_inputs: Sequence[str],
    feeds: Sequence[torch.Tensor],
) -> list[torch.Tensor]:
    """The graph's outputs on `feeds` (one per user input, in order), constants by placeholder name."""
    by_name = dict(zip(user_inputs, feeds, strict=True))
    args = []
    for node in graph_module.graph.nodes:
        if node.op != "placeholder":
            continue
        if node.name in by_name:
            args.append(by_name[node.name])
        elif node.name in constants:
            args.append(constants[node.name])
        else:
            raise KeyError(f"placeholder {node.name} is neither a user input nor a known constant")
    with torch.no_grad():
        outputs = QParamInterpreter(graph_module).run(*args)
    flat = outputs if isinstance(outputs, list | tuple) else [outputs]
    return [x for x in flat if isinstance(x, torch.Tensor)]
