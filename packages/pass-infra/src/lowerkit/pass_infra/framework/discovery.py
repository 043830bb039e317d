"""Deriving a pass's targeted ops from the class attributes existing passes already have."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from lowerkit.pass_infra._upstream import (
    EdgeOpOverload,
    EdgeOpOverloadPacket,
    OpOverload,
    OpOverloadPacket,
)

__all__ = ["TARGET_ATTRIBUTES", "discover_targeted_ops"]

#: Attribute names read by `discover_targeted_ops`, in the order they are read.
#: Arm passes in executorch 1.5.1 use ``target_ops`` (ArmOpTargetedPass, ~97 passes),
#: ``targeted_ops``, ``_TARGET_OPS``, ``_supported_ops`` and ``_EDGE_OPS``/``_ATEN_OPS``.
TARGET_ATTRIBUTES: tuple[str, ...] = (
    "target_ops",
    "targeted_ops",
    "_TARGET_OPS",
    "_supported_ops",
    "_EDGE_OPS",
    "_ATEN_OPS",
)

_OP_TYPES = (
    OpOverload,
    OpOverloadPacket,
    EdgeOpOverload,
    EdgeOpOverloadPacket,
)


def discover_targeted_ops(cls: Any) -> tuple[Any, ...] | None:
    """The union of a pass's declared target ops (class or instance), or None if it declares none.

    Empty collections say nothing and are ignored. If a declared collection holds
    anything that is not an operator, the declaration cannot be trusted and the
    result is None (run the pass untargeted).
    """
    found: list[Any] = []
    seen: set[Any] = set()
    for name in TARGET_ATTRIBUTES:
        value = getattr(cls, name, None)
        if value is None or isinstance(value, (str, bytes)) or callable(value):
            continue
        if isinstance(value, Mapping):
            value = list(value.keys())
        try:
            items = list(value)
        except TypeError:
            continue
        for op in items:
            if not isinstance(op, _OP_TYPES):
                return None
            if op not in seen:
                seen.add(op)
                found.append(op)
    return tuple(found) if found else None
