"""lowerkit's one static int8 config is ExecuTorch's (its Core ML tester's ``coreml_static_int8`` config)."""

from __future__ import annotations

from executorch.backends.apple.coreml.test.tester import _get_static_int8_linear_qconfig

from lowerkit.coreml_quantizer import static_int8_config


def test_static_int8_config_is_executorchs() -> None:
    assert static_int8_config() == _get_static_int8_linear_qconfig()


def test_keep_float_names_modules_left_in_float() -> None:
    config = static_int8_config(["features.3", "classifier"])
    assert config.module_name_configs == {"features.3": None, "classifier": None}
    assert config.global_config == static_int8_config().global_config
