"""register(): idempotent, and lowerkit wins deterministically against other registrations."""

from __future__ import annotations

import sys
from collections.abc import Iterator
from typing import Any

import coremltools as ct
import pytest
import torch
from coremltools.converters.mil.frontend.torch import register_torch_op

from coreml_compiler_ops_tests.conftest import apply_codebook, constexpr_ops, convert, fresh_model
from lowerkit.coreml_compiler_ops import (
    _upstream,
    displaced_translation,
    is_registered,
    register,
    registered_ops,
    unregister,
)

CODEBOOK_NAMES = ["quant::dequantize_codebook", "quant.dequantize_codebook"]


class ThirdPartyTranslationUsed(Exception):
    pass


def dequantize_codebook(context: Any, node: Any) -> None:
    """Stands in for ExecuTorch's translation: same name, same aliases, override=False."""
    raise ThirdPartyTranslationUsed(node.name)


@pytest.fixture()
def pristine_registry() -> Iterator[dict[str, Any]]:
    """Snapshot and restore coremltools' registry (and lowerkit's guard) around a test."""
    mapping = _upstream.REGISTRY.name_to_func_mapping
    snapshot = dict(mapping)
    unregister()
    yield mapping
    unregister()
    mapping.clear()
    mapping.update(snapshot)
    register()


def _third_party_registers() -> None:
    register_torch_op(dequantize_codebook, torch_alias=CODEBOOK_NAMES, override=False)


def _uint4_codebook_model() -> torch.nn.Module:
    return apply_codebook(fresh_model(), torch.uint4, 4, [-1, -1])


def test_executorch_core_ml_translations_are_not_in_this_process() -> None:
    assert "executorch.backends.apple.coreml.compiler.torch_ops" not in sys.modules


def test_register_is_idempotent(pristine_registry: dict[str, Any]) -> None:
    register()
    first = {name: pristine_registry[name] for name in registered_ops()}
    register()
    register()
    assert {name: pristine_registry[name] for name in registered_ops()} == first
    assert is_registered()
    assert {
        "split_copy",
        "torchao.dequantize_affine",
        "quant.dequantize_codebook",
        "dim_order_ops._clone_dim_order",
    } <= set(registered_ops())


def test_coremltools_alone_rejects_a_second_registration(pristine_registry: dict[str, Any]) -> None:
    """The failure lowerkit's guard prevents: coremltools' registry refuses a duplicate name."""
    _third_party_registers()
    with pytest.raises(ValueError, match="already registered"):
        _third_party_registers()


def test_registration_after_register_keeps_lowerkit(pristine_registry: dict[str, Any]) -> None:
    register()
    _third_party_registers()  # no "already registered" error
    assert is_registered()
    for name in CODEBOOK_NAMES:
        assert displaced_translation(name) is dequantize_codebook
    mlmodel = convert(_uint4_codebook_model(), ct.target.iOS18)  # the stand-in would raise
    assert constexpr_ops(mlmodel) == ["constexpr_lut_to_dense"] * 2
    unregister()
    for name in CODEBOOK_NAMES:
        assert pristine_registry[name] is dequantize_codebook
    with pytest.raises(ThirdPartyTranslationUsed):
        convert(_uint4_codebook_model(), ct.target.iOS18)


def test_registration_before_register_is_taken_over_and_restored(
    pristine_registry: dict[str, Any],
) -> None:
    _third_party_registers()
    register()
    assert is_registered()
    assert displaced_translation("quant.dequantize_codebook") is dequantize_codebook
    assert (
        constexpr_ops(convert(_uint4_codebook_model(), ct.target.iOS18))
        == ["constexpr_lut_to_dense"] * 2
    )
    unregister()
    assert not is_registered()
    assert pristine_registry["quant.dequantize_codebook"] is dequantize_codebook


def test_guard_keeps_coremltools_semantics_for_other_names(
    pristine_registry: dict[str, Any],
) -> None:
    register()

    def relu(context: Any, node: Any) -> None:
        raise AssertionError("never called")

    with pytest.raises(ValueError, match="already registered"):
        register_torch_op(relu, override=False)
    assert pristine_registry["relu"] is not relu
