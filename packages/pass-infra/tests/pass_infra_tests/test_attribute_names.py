"""attribute_names: pt2e's fresh attribute names, stock's name after any sequence of edits."""

from __future__ import annotations

import importlib
import random
from typing import Any

import pytest
import torch
from torch.ao.quantization.fx.utils import get_new_attr_name_with_prefix as stock_namer

from lowerkit.pass_infra.accelerations import attribute_names
from lowerkit.pass_infra.accelerations.attribute_names import (
    FRESH_ATTRIBUTE_NAMES,
    fresh_attribute_namer,
)

_PREFIXES = ("activation_post_process_", "_scale_", "x.y_")


def _edit(module: torch.nn.Module, rng: random.Random, name: str) -> None:
    """Give `module` attribute `name` (some kind), or take one of its attributes away."""
    kind = rng.choice(["submodule", "buffer", "parameter", "plain", "delete", "delete"])
    if kind == "delete":
        taken = [n for n in [*module._modules, *module._buffers, *module._parameters] if n[0] in "a_x"]
        if taken:
            delattr(module, rng.choice(taken))
    elif kind == "submodule":
        setattr(module, name, torch.nn.Identity())
    elif kind == "buffer":
        module.register_buffer(name, torch.zeros(1))
    elif kind == "parameter":
        module.register_parameter(name, torch.nn.Parameter(torch.zeros(1)))
    else:
        object.__setattr__(module, name, 1)


@pytest.mark.parametrize("seed", range(20))
def test_the_name_is_stocks_after_any_edits(seed: int) -> None:
    rng = random.Random(seed)
    module = torch.nn.Module()
    for _ in range(300):
        prefix = rng.choice(_PREFIXES)
        name = fresh_attribute_namer(prefix)(module)
        assert name == stock_namer(prefix)(module)
        if rng.random() < 0.7:
            setattr(module, name, torch.nn.Identity())  # as prepare_pt2e adds an observer
        else:
            _edit(module, rng, name)


def test_a_deleted_name_is_given_again() -> None:
    module = torch.nn.Module()
    for _ in range(5):
        setattr(module, fresh_attribute_namer("obs_")(module), torch.nn.Identity())
    del module.obs_2
    assert fresh_attribute_namer("obs_")(module) == "obs_2"


def test_prepare_and_convert_name_with_it_in_scope(monkeypatch: pytest.MonkeyPatch) -> None:
    calls: list[str] = []

    def counting(prefix: str) -> Any:
        calls.append(prefix)
        return fresh_attribute_namer(prefix)

    monkeypatch.setattr(attribute_names, "fresh_attribute_namer", counting)
    modules = [importlib.import_module(m) for m in ("torch.ao.quantization.fx.prepare", "torchao.quantization.pt2e.utils")]
    stock = [m.get_new_attr_name_with_prefix for m in modules]
    with FRESH_ATTRIBUTE_NAMES.scope():
        for module in modules:
            assert module.get_new_attr_name_with_prefix("p_")(torch.nn.Module()) == "p_0"
    assert calls == ["p_", "p_"]
    assert [m.get_new_attr_name_with_prefix for m in modules] == stock
