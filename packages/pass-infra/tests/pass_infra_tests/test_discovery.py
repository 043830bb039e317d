"""discover_targeted_ops: targets from the class attributes existing passes use."""

from __future__ import annotations

import torch
from executorch.exir.dialects._ops import ops as exir_ops
from executorch.exir.pass_base import ExportPass

from lowerkit.pass_infra import TARGET_ATTRIBUTES, discover_targeted_ops

E = exir_ops.edge.aten
A = torch.ops.aten


def test_each_attribute_name_is_read():
    for name in TARGET_ATTRIBUTES:
        cls = type("P", (ExportPass,), {name: (E.relu.default,)})
        assert discover_targeted_ops(cls) == (E.relu.default,), name


def test_union_of_edge_and_aten_lists_in_declaration_order_without_duplicates():
    class P(ExportPass):
        _EDGE_OPS = (E.as_strided_copy.default,)
        _ATEN_OPS = (A.as_strided_copy.default,)
        target_ops = _EDGE_OPS + _ATEN_OPS

    assert discover_targeted_ops(P) == (E.as_strided_copy.default, A.as_strided_copy.default)


def test_sets_dicts_packets_and_instances():
    class P(ExportPass):
        _TARGET_OPS = {E.amax.default: "x"}
        _supported_ops = {A.max}

        def __init__(self) -> None:
            super().__init__()
            self.targeted_ops = [E.relu.default]

    assert set(discover_targeted_ops(P) or ()) == {E.amax.default, A.max}
    assert set(discover_targeted_ops(P()) or ()) == {E.amax.default, A.max, E.relu.default}


def test_nothing_declared_empty_or_untrustworthy_gives_none():
    class Plain(ExportPass):
        pass

    class Empty(ExportPass):
        targeted_ops: list = []

    class Strange(ExportPass):
        target_ops = (E.relu.default, "relu")

    assert discover_targeted_ops(Plain) is None
    assert discover_targeted_ops(Empty) is None
    assert discover_targeted_ops(Strange) is None
