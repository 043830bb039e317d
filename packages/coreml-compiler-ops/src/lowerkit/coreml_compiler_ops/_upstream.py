"""Every reach into coremltools' private names for this package lives here.

coremltools 9.0 is the reference. A coremltools bump means re-reading this one file.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from coremltools.converters.mil.frontend import _utils as _ct_frontend_utils
from coremltools.converters.mil.frontend.torch import ops as _ct_torch_ops
from coremltools.converters.mil.frontend.torch.dim_order_ops import (
    _empty_dim_order as _ct_empty_dim_order,
)
from coremltools.converters.mil.frontend.torch.dim_order_ops import (
    _to_dim_order_copy as _ct_to_dim_order_copy,
)
from coremltools.converters.mil.frontend.torch.torch_op_registry import (
    _TORCH_OPS_REGISTRY,
    TorchOpsRegistry,
)
from coremltools.converters.mil.mil import types as _ct_types
from coremltools.converters.mil.mil.block import is_current_opset_version_compatible_with

TranslationFn = Callable[[Any, Any], None]

#: The process-wide registry coremltools' torch frontend looks translations up in.
REGISTRY: TorchOpsRegistry = _TORCH_OPS_REGISTRY

#: torch dtype enum number (as the frontend sees it) -> numpy dtype / torch dtype.
NUM_TO_NUMPY_DTYPE: dict[int, Any] = _ct_torch_ops.NUM_TO_NUMPY_DTYPE
NUM_TO_TORCH_DTYPE: dict[int, Any] = _ct_torch_ops.NUM_TO_TORCH_DTYPE

# Frontend helpers that ExecuTorch's translations also use: reusing them keeps the MIL identical.
get_inputs: Callable[..., Any] = _ct_torch_ops._get_inputs
get_kwinputs: Callable[..., Any] = _ct_torch_ops._get_kwinputs
noop_translation: TranslationFn = _ct_torch_ops.noop
split_translation: TranslationFn = _ct_torch_ops.split
to_dim_order_copy_translation: TranslationFn = _ct_to_dim_order_copy
empty_dim_order_translation: TranslationFn = _ct_empty_dim_order
construct_constexpr_dequant_op: Callable[..., Any] = (
    _ct_frontend_utils._construct_constexpr_dequant_op
)
construct_constexpr_lut_op: Callable[..., Any] = _ct_frontend_utils._construct_constexpr_lut_op


def opset_at_least(opset: Any) -> bool:
    """Whether the program being built targets ``opset`` (a ``coremltools.target``) or later."""
    return bool(is_current_opset_version_compatible_with(opset))


def opset_at_least_ios18() -> bool:
    """Whether the program being built targets iOS18 / macOS15 or later."""
    from coremltools import target

    return opset_at_least(target.iOS18)


def sub_byte_np_dtype(name: str) -> Any:
    """coremltools' numpy stand-in dtype for a MIL type name such as "int4" or "uint3"."""
    return _ct_types.nptype_from_builtin(_ct_types.string_to_builtin(name))


def mil_type_name(np_dtype: Any) -> str | None:
    """MIL type name ("uint4", "fp16", ...) of a numpy dtype, sub-byte stand-ins included."""
    try:
        return str(_ct_types.builtin_to_string(_ct_types.numpy_type_to_builtin_type(np_dtype)))
    except Exception:
        return None


def install_register_func(wrapper: Callable[..., None] | None) -> None:
    """Route (or, with None, stop routing) ``register_torch_op`` through ``wrapper``.

    ``register_torch_op`` looks ``REGISTRY.register_func`` up at call time, so an instance
    attribute shadows the class method for every later registration in the process.
    """
    if wrapper is None:
        REGISTRY.__dict__.pop("register_func", None)
    else:
        setattr(REGISTRY, "register_func", wrapper)  # noqa: B010 - shadow the method per instance


def original_register_func(func: Any, torch_alias: Any = None, override: bool = False) -> None:
    """coremltools' own ``TorchOpsRegistry.register_func`` (no lowerkit guard)."""
    TorchOpsRegistry.register_func(REGISTRY, func, torch_alias, override)


def torch_graph_nodes(context: Any) -> list[Any]:
    """Nodes of the torch IR graph a frontend ``TranscriptionContext`` is converting (top level)."""
    graph = getattr(context, "_torch_graph", None)
    return list(getattr(graph, "nodes", []) or [])
