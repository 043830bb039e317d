"""cached_signature_lookups: ExportGraphSignature's input-name lookups served from a cache that
every change of the input specs invalidates; stock for other threads and after the scope."""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any

import pytest
import torch
from torch.export.graph_signature import (
    ExportGraphSignature,
    InputKind,
    InputSpec,
    TensorArgument,
)

from lowerkit.pass_infra import _upstream
from lowerkit.pass_infra.accelerations.signature_lookups import (
    SIGNATURE_LOOKUPS,
    cached_signature_lookups,
)

VIEWS = ("inputs_to_parameters", "inputs_to_buffers", "inputs_to_lifted_tensor_constants")
STOCK = _upstream.signature_input_views()


class _Model(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.linear = torch.nn.Linear(4, 4)
        self.register_buffer("offset", torch.ones(4))
        self.register_buffer("scratch", torch.zeros(4), persistent=False)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.linear(x) + self.offset + self.scratch + torch.tensor(2.0)


def _signature() -> ExportGraphSignature:
    return torch.export.export(_Model(), (torch.randn(2, 4),)).graph_signature


def _assert_stock(signature: ExportGraphSignature) -> None:
    for view in VIEWS:
        assert dict(getattr(signature, view)) == dict(STOCK[view](signature)), view


def test_lookups_are_served_from_the_cache_and_equal_stock() -> None:
    signature = _signature()
    with cached_signature_lookups():
        _assert_stock(signature)
        assert signature.inputs_to_buffers is signature.inputs_to_buffers  # served, not rebuilt
        assert set(signature.inputs_to_buffers.values()) == {"offset", "scratch"}
        assert len(signature.inputs_to_parameters) == 2
        assert len(signature.inputs_to_lifted_tensor_constants) == 1
    assert signature.inputs_to_buffers is not signature.inputs_to_buffers  # stock again


def _rename_arg(signature: ExportGraphSignature) -> None:
    name = next(iter(signature.inputs_to_buffers))
    signature.replace_all_uses(name, "renamed")


def _retarget(signature: ExportGraphSignature) -> None:
    spec = next(s for s in signature.input_specs if s.kind == InputKind.PARAMETER)
    spec.target = "elsewhere"


def _rekind(signature: ExportGraphSignature) -> None:
    spec = next(s for s in signature.input_specs if s.kind == InputKind.CONSTANT_TENSOR)
    spec.kind = InputKind.BUFFER
    spec.persistent = True


def _insert(signature: ExportGraphSignature) -> None:
    spec = InputSpec(InputKind.BUFFER, TensorArgument("b_new"), "new", persistent=True)
    signature.input_specs.insert(0, spec)


def _replace_element(signature: ExportGraphSignature) -> None:
    index = next(i for i, s in enumerate(signature.input_specs) if s.kind == InputKind.BUFFER)
    old = signature.input_specs[index]
    signature.input_specs[index] = InputSpec(InputKind.BUFFER, TensorArgument(old.arg.name), "other", True)


def _replace_element_unseen(signature: ExportGraphSignature) -> None:
    """A spec built elsewhere (its __init__ long done) swapped in: only the list compare sees it."""
    index = next(i for i, s in enumerate(signature.input_specs) if s.kind == InputKind.PARAMETER)
    signature.input_specs[index] = _PREBUILT


def _reassign_list(signature: ExportGraphSignature) -> None:
    signature.input_specs = [s for s in signature.input_specs if s.kind != InputKind.PARAMETER]


def _swap_arg(signature: ExportGraphSignature) -> None:
    spec = next(s for s in signature.input_specs if s.kind == InputKind.BUFFER)
    spec.arg = TensorArgument("swapped")


def _pop(signature: ExportGraphSignature) -> None:
    signature.input_specs.pop(next(i for i, s in enumerate(signature.input_specs) if s.kind == InputKind.BUFFER))


_PREBUILT = InputSpec(InputKind.PARAMETER, TensorArgument("p_prebuilt"), "prebuilt")

MUTATIONS: dict[str, Callable[[ExportGraphSignature], None]] = {
    "rename arg (replace_all_uses)": _rename_arg,
    "assign target": _retarget,
    "assign kind": _rekind,
    "insert spec": _insert,
    "replace element": _replace_element,
    "replace element with a prebuilt spec": _replace_element_unseen,
    "reassign input_specs": _reassign_list,
    "assign arg": _swap_arg,
    "pop spec": _pop,
}


@pytest.mark.parametrize("mutation", list(MUTATIONS), ids=list(MUTATIONS))
def test_every_change_of_the_specs_invalidates(mutation: str) -> None:
    signature = _signature()
    with cached_signature_lookups():
        before = {view: dict(getattr(signature, view)) for view in VIEWS}
        MUTATIONS[mutation](signature)
        _assert_stock(signature)
        after = {view: dict(getattr(signature, view)) for view in VIEWS}
    assert after != before, "the mutation changed nothing the lookups show"


def test_other_threads_get_stock_while_a_scope_is_open() -> None:
    signature = _signature()
    seen: list[Any] = []

    def other() -> None:
        seen.append(signature.inputs_to_buffers is signature.inputs_to_buffers)
        seen.append(SIGNATURE_LOOKUPS.active())

    with cached_signature_lookups():
        assert signature.inputs_to_buffers is signature.inputs_to_buffers
        thread = threading.Thread(target=other)
        thread.start()
        thread.join()
    assert seen == [False, False]


def test_the_scope_restores_the_classes() -> None:
    classes = (ExportGraphSignature, *_upstream.signature_argument_classes())
    before = [dict(vars(c)) for c in classes]
    with cached_signature_lookups(), cached_signature_lookups():
        assert "__setattr__" in vars(InputSpec)
        assert vars(ExportGraphSignature)["inputs_to_buffers"] is not before[0]["inputs_to_buffers"]
    assert [dict(vars(c)) for c in classes] == before
