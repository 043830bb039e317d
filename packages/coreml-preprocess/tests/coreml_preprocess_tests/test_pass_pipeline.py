"""MIL pass pipelines: names validated against coremltools' registry, presets, suggestions."""

from __future__ import annotations

import coremltools as ct
import pytest
from coremltools.converters.mil.mil.passes.pass_registry import PASS_REGISTRY

from lowerkit.coreml_preprocess import PassPipelineError, resolve_pass_pipeline, validate_pass_names


def test_default_preset_is_coremltools_default():
    pipeline = resolve_pass_pipeline("default")
    assert pipeline.passes == tuple(ct.PassPipeline.DEFAULT.passes)
    assert pipeline.to_coremltools().passes == ct.PassPipeline.DEFAULT.passes


def test_empty_preset():
    pipeline = resolve_pass_pipeline("empty")
    assert pipeline.passes == ()
    assert pipeline.to_coremltools().passes == []


def test_custom_pipeline_keeps_order_and_describes_itself():
    names = ["common::const_elimination", "common::dead_code_elimination"]
    pipeline = resolve_pass_pipeline(names)
    assert pipeline.preset == "custom"
    assert pipeline.to_coremltools().passes == names
    text = pipeline.describe()
    assert text.index("const_elimination") < text.index("dead_code_elimination")


def test_every_registered_pass_is_accepted():
    names = sorted(PASS_REGISTRY.passes)
    assert validate_pass_names(names) == tuple(names)


@pytest.mark.parametrize(
    ("typo", "suggestion"),
    [
        ("common::fuse_conv_batchnrom", "common::fuse_conv_batchnorm"),
        ("fuse_conv_batchnorm", "common::fuse_conv_batchnorm"),
        ("common::dead_code_elimnation", "common::dead_code_elimination"),
    ],
)
def test_misspelt_pass_suggests(typo, suggestion):
    with pytest.raises(PassPipelineError) as raised:
        resolve_pass_pipeline(["common::const_elimination", typo])
    message = str(raised.value)
    assert f"'{typo}' (entry 1)" in message
    assert f"Did you mean '{suggestion}'" in message


def test_unknown_preset_suggests():
    with pytest.raises(PassPipelineError, match="Did you mean 'default'"):
        resolve_pass_pipeline("defualt")


def test_non_string_entry():
    with pytest.raises(PassPipelineError, match="entry 0 is int"):
        validate_pass_names([3])  # type: ignore[list-item]
