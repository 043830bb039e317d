"""Fixes of ExecuTorch's Arm flow where stock fails on common models; each changes only what stock raises on.

`SCALAR_OF_A_WEIGHT` (GPT-2 → TOSA INT, found on the corpus's ``hf:gpt2_2l``): the Arm quantizer's
``transform_for_annotation`` pipeline (and the TOSA pipeline) turns ``mul.Scalar(x, s)`` into
``mul.Tensor(x, full((1,), s))`` with ``ReplaceScalarWithTensorArgPass.get_replacement``, which reads
the dtype and device of ``x.to_tensor()``. When ``x`` is a weight the graph reads by ``get_attr``
(GPT-2 scales a constant that way), ``ExportPass`` hands over the tensor itself, and stock stops with
``AttributeError: 'Parameter' object has no attribute 'to_tensor'``. Here such an ``x`` gives its own
dtype and device; every other call is stock's. Held by ``accelerated_arm_quantization()`` and
``accelerated_arm_pipeline()`` (so by ``lower_to_arm`` and ``lowerkit lower``).
"""

from __future__ import annotations

from typing import Any

import torch

from lowerkit.arm_passes import _upstream
from lowerkit.pass_infra.accelerations.patching import Patch, Replacement

__all__ = ["SCALAR_OF_A_WEIGHT", "get_replacement"]


def get_replacement(self: Any, op: Any, args: tuple[Any, ...], kwargs: dict[str, Any], meta: Any) -> Any:
    """``ReplaceScalarWithTensorArgPass.get_replacement``, also for a first argument that is a tensor."""
    pass_class = _upstream.replace_scalar_with_tensor_pass()
    first = args[0]
    if not isinstance(first, torch.Tensor):
        return _upstream.STOCK_GET_REPLACEMENT(self, op, args, kwargs, meta)
    base: Any = super(pass_class, self)  # ExportPass, after the pass class in the MRO, as upstream's super()
    scalar = base.call_operator(
        _upstream.full_op(op), args=((1,), float(args[1])), kwargs={"dtype": first.dtype, "device": first.device},
        meta=meta,
    )  # fmt: skip
    return base.call_operator(op=self.scalar_to_tensor_ops[op], args=(first, scalar, *args[2:]), kwargs=kwargs, meta=meta)


#: Held by the Arm scopes (see the module docstring).
SCALAR_OF_A_WEIGHT = Patch(
    "lowerkit.arm_passes.upstream_fixes",
    lambda: [Replacement(_upstream.replace_scalar_with_tensor_pass(), "get_replacement", get_replacement)],
)
