"""cheaper_replay's direct argument handling gives exactly what the stock tracer and pytree give."""

from __future__ import annotations

import collections
from typing import Any

import pytest
import torch
from executorch.exir.pass_base import ExportPass, ExportPassBaseError, ProxyValue
from torch._subclasses.fake_tensor import FakeTensorMode
from torch.fx.experimental.symbolic_shapes import DimDynamic, ShapeEnv, StatelessSymbolicContext
from torch.fx.immutable_collections import immutable_dict, immutable_list
from torch.utils import _pytree as pytree

from lowerkit.pass_infra import cheaper_replay
from lowerkit.pass_infra._upstream import extract_symbolic_snapshot
from lowerkit.pass_infra.accelerations.cheaper_replay import (
    map_proxy_values,
    plainly_static,
    validate_symbolic_inputs,
)

Pair = collections.namedtuple("Pair", ["a", "b"])


def _same(a: Any, b: Any) -> bool:
    """Equal values of the very same types, all the way down (nodes by identity)."""
    if type(a) is not type(b):
        return False
    if isinstance(a, (list, tuple)):
        return len(a) == len(b) and all(_same(x, y) for x, y in zip(a, b, strict=True))
    if isinstance(a, dict):
        return list(a) == list(b) and all(_same(a[k], b[k]) for k in a)
    if isinstance(a, (torch.fx.Node, ProxyValue, torch.Tensor)):
        return a is b
    return bool(a == b)


def _arguments(proxy: torch.fx.Proxy) -> list[Any]:
    return [
        proxy,
        3,
        2.5,
        True,
        None,
        "name",
        ...,
        torch.float32,
        torch.device("cpu"),
        torch.channels_last,
        torch.strided,
        (proxy, [1, 2], {"k": proxy, "n": None}),
        [proxy, (proxy, [0.5])],
        immutable_list([proxy, 1, immutable_list([2])]),
        immutable_dict({"a": proxy, "b": [proxy]}),
        {"x": immutable_list([proxy])},
        torch.Size([2, 3]),
        (),
        {},
    ]


def test_create_arg_gives_what_the_stock_tracer_gives() -> None:
    tracer = ExportPass.ExportTracer(ExportPass(), torch.fx.graph.CodeGen())
    proxy = tracer.create_proxy("placeholder", "x", (), {})
    for argument in _arguments(proxy):
        stock = tracer.create_arg(argument)
        with cheaper_replay():
            fast = tracer.create_arg(argument)
        assert _same(fast, stock), argument


def test_the_comparison_notices_a_list_turned_tuple() -> None:
    assert not _same([1, 2], (1, 2))
    assert not _same(immutable_list([1]), [1])


def test_proxy_value_mapping_gives_what_pytree_gives() -> None:
    mode = FakeTensorMode()
    fake = mode.from_tensor(torch.zeros(2))
    value = ProxyValue(fake, torch.fx.Graph().placeholder("x"))
    other = ProxyValue(None, torch.fx.Graph().placeholder("y"))
    trees = [
        value,
        fake,
        (value, [1, other], {"k": value, "n": None}),
        immutable_list([value, immutable_list([other, 2])]),
        immutable_dict({"a": value, "b": (other,)}),
        Pair(value, [other]),
        collections.OrderedDict(a=value),
        torch.Size([4, 5]),
        (torch.float32, torch.device("cpu"), "s", 1.5, ...),
    ]
    for fn in (lambda v: v.data, lambda v: v.node):
        for tree in trees:
            assert _same(map_proxy_values(fn, tree), pytree.tree_map_only(ProxyValue, fn, tree)), tree


def _symbolic_fake() -> Any:
    mode = FakeTensorMode(shape_env=ShapeEnv())
    context = StatelessSymbolicContext(dynamic_sizes=[DimDynamic.DYNAMIC, DimDynamic.STATIC])
    return mode.from_tensor(torch.zeros(4, 3), symbolic_context=context)


def test_plainly_static_values_have_no_symbolic_snapshot() -> None:
    symbolic = _symbolic_fake()
    assert isinstance(symbolic.shape[0], torch.SymInt)
    static = FakeTensorMode().from_tensor(torch.zeros(4, 3))
    for val in (static, 3, None, 1.5):
        assert plainly_static(val)
        assert extract_symbolic_snapshot(val) is None
    for val in (symbolic, [static]):
        assert not plainly_static(val)
    assert extract_symbolic_snapshot(symbolic) is not None


def _graph_with_input(val: Any) -> torch.fx.GraphModule:
    graph = torch.fx.Graph()
    x = graph.placeholder("x")
    x.meta["val"] = val
    graph.output((x,))
    return torch.fx.GraphModule(torch.nn.Module(), graph)


def test_symbolic_inputs_are_still_validated_the_stock_way() -> None:
    old = _graph_with_input(_symbolic_fake())
    lost = _graph_with_input(FakeTensorMode().from_tensor(torch.zeros(4, 3)))
    with pytest.raises(ExportPassBaseError, match="did not preserve symbolic metadata"):
        ExportPass()._validate_symbolic_input_snapshots(old, lost)
    with pytest.raises(ExportPassBaseError, match="did not preserve symbolic metadata"):
        validate_symbolic_inputs(ExportPass(), old, lost)
    validate_symbolic_inputs(ExportPass(), old, old)
