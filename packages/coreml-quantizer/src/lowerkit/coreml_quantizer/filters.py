"""Node filters that pick the ops a module-type or module-name config applies to."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from torch.fx import Node
from torchao.quantization.pt2e.quantizer.utils import get_module_name_filter

NodeFilter = Callable[[Node], bool]


def get_object_type_filter(tp: Any) -> NodeFilter:
    """True for nodes created by a module of type ``tp`` or by the function ``tp``."""

    def object_type_filter(n: Node) -> bool:
        nn_module_stack = n.meta.get("nn_module_stack", {})
        types = [t for _, t in nn_module_stack.values()]
        source_fn_stack = n.meta.get("source_fn_stack", {})
        types.extend([t for _, t in source_fn_stack])
        return tp in types

    return object_type_filter


def get_not_object_type_or_name_filter(
    tp_list: list[Any], module_name_list: list[str]
) -> NodeFilter:
    """True for nodes created by none of the types in ``tp_list`` nor modules in ``module_name_list``."""
    object_type_filters = [get_object_type_filter(tp) for tp in tp_list]
    module_name_list_filters = [get_module_name_filter(m) for m in module_name_list]

    def not_object_type_or_name_filter(n: Node) -> bool:
        return not any(f(n) for f in object_type_filters + module_name_list_filters)

    return not_object_type_or_name_filter


__all__ = [
    "NodeFilter",
    "get_module_name_filter",
    "get_not_object_type_or_name_filter",
    "get_object_type_filter",
]
