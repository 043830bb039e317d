"""Unsupported configs and models that were not exported fail early with a clear error."""

from __future__ import annotations

import pytest
import torch
from coremltools.optimize.torch.quantization import (
    LinearQuantizerConfig,
    ModuleLinearQuantizerConfig,
)
from torchao.quantization.pt2e.quantize_pt2e import prepare_pt2e as torchao_prepare_pt2e

from coreml_quantizer_tests.conftest import MODELS, example, exported, static_config
from lowerkit.coreml_quantizer import (
    CoreMLQuantizer,
    CoreMLQuantizerError,
    IgnoredConfigFieldWarning,
    prepare_pt2e,
    prepare_qat_pt2e,
    validate_config,
)


def _global(**kwargs: object) -> LinearQuantizerConfig:
    return LinearQuantizerConfig(global_config=ModuleLinearQuantizerConfig(**kwargs))


@pytest.mark.parametrize(
    ("config", "message"),
    [
        (None, "needs a config"),
        (ModuleLinearQuantizerConfig(), "wrap it: LinearQuantizerConfig"),
        ({"global_config": {}}, "takes a coremltools LinearQuantizerConfig"),
        (_global(weight_dtype="qint4"), "4-bit weights are not supported"),
        (_global(weight_dtype=torch.float32), "activation-only quantization"),
        (_global(algorithm="learnable"), "algorithm='learnable' is not supported"),
        (_global(activation_observer="ema_min_max"), "activation_observer: Unsupported observer"),
        (_global(weight_observer="ema_min_max"), "weight_observer: Unsupported observer"),
        (
            LinearQuantizerConfig(module_type_configs={"NotAModule": None}),
            "'NotAModule' names no torch.nn module",
        ),
        (
            LinearQuantizerConfig(
                module_name_configs={"fc": ModuleLinearQuantizerConfig(weight_dtype="quint4")}
            ),
            r"module_name_configs\[.fc.\]: 4-bit",
        ),
    ],
)
def test_unsupported_configs_raise(config: object, message: str) -> None:
    with pytest.raises(CoreMLQuantizerError, match=message) as caught:
        CoreMLQuantizer(config)  # type: ignore[arg-type,unused-ignore]
    assert isinstance(caught.value, ValueError)


@pytest.mark.parametrize(
    "config",
    [
        LinearQuantizerConfig(),
        _global(activation_dtype=torch.float32),
        _global(weight_dtype=torch.float32, activation_dtype=torch.float32),
        _global(quantization_scheme="affine", weight_per_channel=False, weight_observer="min_max"),
        LinearQuantizerConfig(
            global_config=ModuleLinearQuantizerConfig(),
            module_type_configs={torch.nn.Linear: None, "Conv2d": ModuleLinearQuantizerConfig()},
            module_name_configs={"fc": None},
        ),
    ],
)
def test_supported_configs_pass(config: LinearQuantizerConfig) -> None:
    assert validate_config(config) is config
    assert CoreMLQuantizer(config).config is config


@pytest.mark.parametrize(
    ("config", "field"),
    [
        (_global(milestones=[0, 0, 10, 10]), "milestones"),
        (
            LinearQuantizerConfig(
                module_type_configs={torch.nn.Linear: ModuleLinearQuantizerConfig(milestones=[0, 1, 2, 3])}
            ),
            "milestones",
        ),
        (LinearQuantizerConfig(non_traceable_module_names=["fc"]), "non_traceable_module_names"),
    ],
)
def test_fields_pt2e_ignores_warn_and_are_accepted(config: LinearQuantizerConfig, field: str) -> None:
    with pytest.warns(IgnoredConfigFieldWarning, match=f"{field}.*ignored") as caught:
        quantizer = CoreMLQuantizer(config)
    assert quantizer.config is config
    assert len(caught) == 1
    assert caught[0].filename == __file__, "the warning points at the caller's line"


def test_module_instead_of_exported_graph_module() -> None:
    factory, _ = MODELS["linear"]
    with pytest.raises(CoreMLQuantizerError, match=r"not an exported GraphModule.*torch\.export"):
        prepare_pt2e(factory(), CoreMLQuantizer(static_config()))
    with pytest.raises(CoreMLQuantizerError, match="not an exported GraphModule"):
        prepare_qat_pt2e(factory(), CoreMLQuantizer(static_config()))


def test_exported_program_instead_of_its_module() -> None:
    factory, _ = MODELS["linear"]
    program = torch.export.export(factory().eval(), example("linear"))
    with pytest.raises(CoreMLQuantizerError, match=r"exported_program.module\(\)"):
        prepare_pt2e(program, CoreMLQuantizer(static_config()))


def test_symbolically_traced_module_is_rejected_even_through_torchao() -> None:
    factory, _ = MODELS["linear"]
    traced = torch.fx.symbolic_trace(factory().eval())
    with pytest.raises(CoreMLQuantizerError, match=r"not produced by torch\.export"):
        torchao_prepare_pt2e(traced, CoreMLQuantizer(static_config()))
    with pytest.raises(CoreMLQuantizerError, match=r"not produced by torch\.export"):
        CoreMLQuantizer(static_config()).annotate(traced)


def test_exported_module_is_accepted() -> None:
    model = exported("linear")
    prepared = prepare_pt2e(model, CoreMLQuantizer(static_config()))
    assert any("activation_post_process" in name for name, _ in prepared.named_modules())
