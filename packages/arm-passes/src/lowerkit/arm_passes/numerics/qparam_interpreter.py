"""Run a graph from the middle of the Arm pass pipeline on real tensors, qparams included.

After ``FoldAndAnnotateQParamsPass`` an aten op takes and makes integer tensors and keeps its
quantization only in ``node.meta["input_qparams"]`` / ``["output_qparams"]`` (``QuantArgs``):
such a node is run as its fake-quantized twin: dequantize the annotated inputs with the
quantized_decomposed ops, run the op in float, quantize the output (the same ops, so the same
rounding, as the fake-quant program). Int32 qparams (after ``InsertRescaleInt32Pass``) are
dequantized and computed in float64, exact for int32 values; an integer ``dtype`` keyword a
pass set on a quantized op is dropped in float. Run on their integers as they are: ops
without qparams (q/dq nodes, views and permutes the passes add), ops that only move values
(``DATA_MOVEMENT``, with the same qparams in and out, whatever the integers' width), and the
ops whose arguments a pass has quantized (``QUANTIZED_ARGUMENTS_AFTER``). TOSA dialect ops run
through ``tosa_torch`` where it has them, else through ExecuTorch's real (reference-model)
kernel; an op with neither raises ``NotImplementedError`` naming it.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping, Sequence
from typing import Any

import torch

from lowerkit.arm_passes import _upstream
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
    if qparams.per_channel and not wide:
        return torch.ops.quantized_decomposed.dequantize_per_channel(
            value, torch.tensor(qparams.scale, dtype=torch.float32), torch.tensor(qparams.zp, dtype=torch.int64),
            int(qparams.axis), int(qparams.qmin), int(qparams.qmax), value.dtype,
        )
    if qparams.per_channel:
        shape = [1] * value.dim()
        shape[qparams.axis] = -1
        scale = torch.tensor(qparams.scale, dtype=torch.float64).view(shape)
        return (value.double() - torch.tensor(qparams.zp, dtype=torch.float64).view(shape)) * scale
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


def _float_kwargs(kwargs: dict[str, Any]) -> dict[str, Any]:
    """The passes set an integer ``dtype`` on some quantized ops (e.g. sum): in float it is dropped."""
    dtype = kwargs.get("dtype")
    if isinstance(dtype, torch.dtype) and not dtype.is_floating_point:
        return {k: v for k, v in kwargs.items() if k != "dtype"}
    return kwargs


#: Ops whose scalar arguments a pass moves into the quantized domain, by that pass: once it
#: has run, the op is run on its integers as it is (its input and output qparams are equal).
QUANTIZED_ARGUMENTS_AFTER = {"aten::clamp": "QuantizeClampArgumentsPass"}


#: Ops that only move values: with the same qparams in and out they are exact on the integers,
#: and the passes move them across rescales (an int32 view keeps its int8 qparams meta).
DATA_MOVEMENT = frozenset(
    f"aten::{name}"
    for name in (
        "view_copy", "permute_copy", "slice_copy", "squeeze_copy", "unsqueeze_copy", "expand_copy", "repeat",
        "clone", "select_copy", "alias_copy", "t_copy", "transpose_copy", "max_pool2d", "index_select",
    )
)


def _op(target: Any) -> str:
    return str(getattr(target, "_name", None) or getattr(target, "__name__", "") or target).split(".")[0]


def _integer_output(node: torch.fx.Node) -> bool:
    value = node.meta.get("val")
    return isinstance(value, torch.Tensor) and not value.dtype.is_floating_point


class QParamInterpreter(torch.fx.Interpreter):
    """A torch.fx.Interpreter for the Arm backend's intermediate graphs (see module doc).

    `passes_run` names the passes that made the graph: a few change what an op's own arguments
    mean without marking the node (``QUANTIZED_ARGUMENTS_AFTER``).
    """

    def __init__(self, module: torch.fx.GraphModule, passes_run: Collection[str] = (), **kwargs: Any) -> None:
        super().__init__(module, **kwargs)
        self.passes_run = frozenset(passes_run)

    def _as_is(self, n: torch.fx.Node, inputs: Mapping[int, Any], outputs: Mapping[int, Any]) -> bool:
        """Whether the node runs on its integers as they are (no dequantize / quantize)."""
        if _is_qdq(n.target) or not (inputs or outputs):
            return True
        if QUANTIZED_ARGUMENTS_AFTER.get(_op(n.target)) in self.passes_run:
            return True
        if _op(n.target) in DATA_MOVEMENT and (not outputs or inputs.get(0) == outputs.get(0)):
            return True
        # Input qparams only and an integer result: the op keeps the input's quantization.
        return not outputs and _integer_output(n)

    def run_node(self, n: torch.fx.Node) -> Any:
        if n.op == "call_module" or isinstance(n.target, _upstream.HigherOrderOperator):
            raise NotImplementedError(
                f"{n.name}: control flow (cond / while_loop submodules) is not interpreted: "
                "the submodules are not recorded per pass"
            )
        if n.op != "call_function":
            return super().run_node(n)
        args, kwargs = self.fetch_args_kwargs_from_env(n)
        name = tosa_name(n.target)
        if name is not None:
            return self._tosa(n, name, args, kwargs)
        inputs = n.meta.get("input_qparams") or {}
        outputs = n.meta.get("output_qparams") or {}
        if self._as_is(n, inputs, outputs):
            return n.target(*args, **kwargs)
        wide = _wide(n)
        floats = list(args)
        for index, qparams in inputs.items():
            if index < len(floats):
                floats[index] = _dequantize(floats[index], qparams, wide)
        result = n.target(*floats, **_float_kwargs(kwargs))
        if 0 in outputs and isinstance(result, torch.Tensor):
            return _quantize(result, outputs[0], wide)
        return result

    def _tosa(self, n: torch.fx.Node, name: str, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
        mine = TOSA_IN_TORCH.get(name)
        if mine is not None:
            try:
                return mine(n, args, kwargs)
            except NotImplementedError:
                pass  # a case tosa_torch leaves to the real kernel
        try:
            return n.target(*args, **kwargs)
        except Exception as error:
            raise NotImplementedError(
                f"tosa.{name} ({n.name}) cannot be evaluated: ExecuTorch has no real kernel it can run "
                f"outside the graph ({type(error).__name__}: {str(error).splitlines()[0][:200]}); "
                "add it to tosa_torch.TOSA_IN_TORCH"
            ) from error


def run_graph(
    graph: torch.fx.Graph,
    root: torch.nn.Module,
    constants: Mapping[str, torch.Tensor],
    user_inputs: Sequence[str],
    feeds: Sequence[torch.Tensor],
    passes_run: Collection[str] = (),
) -> list[torch.Tensor]:
    """The graph's outputs on `feeds` (one per user input, in order), constants by placeholder name;
    `root` resolves get_attr nodes; `passes_run`: the passes that made the graph (see QParamInterpreter)."""
    by_name = dict(zip(user_inputs, feeds, strict=True))
    args = []
    for node in graph.nodes:
        if node.op != "placeholder":
            continue
        if node.name in by_name:
            args.append(by_name[node.name])
        elif node.name in constants:
            args.append(constants[node.name])
        else:
            raise KeyError(f"placeholder {node.name} is neither a user input nor a known constant")
    with torch.no_grad():
        outputs = QParamInterpreter(root, passes_run, graph=graph).run(*args)
    flat = outputs if isinstance(outputs, list | tuple) else [outputs]
    return [x for x in flat if isinstance(x, torch.Tensor)]
