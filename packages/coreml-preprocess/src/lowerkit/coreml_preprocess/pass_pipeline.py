"""MIL pass pipelines: pass names validated against coremltools' registry, presets, provenance."""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import coremltools as ct

from lowerkit.coreml_preprocess import _upstream
from lowerkit.coreml_preprocess.errors import PassPipelineError
from lowerkit.pass_infra.helpers.suggest import did_you_mean

#: Preset names accepted in place of a list of pass names.
PRESETS = ("default", "empty")

#: The user-defined metadata key of the Core ML model that records a non-default pipeline.
PIPELINE_METADATA_KEY = "lowerkit.mil_pass_pipeline"

#: The pipeline name coremltools reports (and lowerkit records) for a user list of passes.
#: Same as ExecuTorch's, so a user pipeline converts exactly as ExecuTorch converts it.
USER_PIPELINE_NAME = "executorch_user_pipeline"


@dataclass(frozen=True)
class MilPassPipeline:
    """A validated MIL pass pipeline: a preset or an ordered list of registered pass names."""

    #: ``"default"``, ``"empty"``, or ``"custom"`` for a user list.
    preset: str
    #: The pass names in order; for ``"default"`` coremltools' default pipeline.
    passes: tuple[str, ...]

    def to_coremltools(self) -> Any:
        """The ``ct.PassPipeline`` ExecuTorch would build for the same compile spec."""
        if self.preset == "default":
            return ct.PassPipeline.DEFAULT
        return ct.PassPipeline(list(self.passes), pipeline_name=USER_PIPELINE_NAME)

    def describe(self) -> str:
        """A printable pipeline: its name, then one pass per line."""
        lines = [f"MIL pass pipeline '{self.preset}' ({len(self.passes)} passes)"]
        lines += [f"  {index:3d}. {name}" for index, name in enumerate(self.passes, 1)]
        return "\n".join(lines)

    def provenance(self) -> str:
        """The JSON recorded in the model's metadata under ``PIPELINE_METADATA_KEY``."""
        return json.dumps({"preset": self.preset, "passes": list(self.passes)}, sort_keys=True)


def _suggest(name: str, valid: Sequence[str]) -> str:
    hint = did_you_mean(name, valid, n=3)
    if not hint and "::" not in name:
        # A bare name ("fuse_conv_batchnorm") most likely misses its namespace.
        bare = {v.split("::", 1)[-1]: v for v in valid}
        hint = did_you_mean(name, bare, n=3)
    return hint


def validate_pass_names(names: Sequence[str]) -> tuple[str, ...]:
    """Check every name against coremltools' pass registry; raise with did-you-mean otherwise."""
    if isinstance(names, str):
        raise PassPipelineError(
            f"a pass pipeline must be a list of pass names or one of the presets {list(PRESETS)}, "
            f"got the string {names!r}."
        )
    registered = _upstream.registered_pass_names()
    ordered = sorted(registered)
    problems = []
    for index, name in enumerate(names):
        if not isinstance(name, str):
            problems.append(f"entry {index} is {type(name).__name__} {name!r}, not a pass name.")
        elif name not in registered:
            problems.append(f"'{name}' (entry {index}) is not a registered MIL pass.{_suggest(name, ordered)}")
    if problems:
        raise PassPipelineError(
            "invalid MIL pass pipeline: "
            + " ".join(problems)
            + " Pass names are namespaced like 'common::fuse_conv_batchnorm'; "
            "see coremltools.converters.mil.mil.passes.pass_registry.PASS_REGISTRY for all "
            f"{len(ordered)} of them, or use a preset {list(PRESETS)}."
        )
    return tuple(names)


def resolve_pass_pipeline(spec: str | Sequence[str]) -> MilPassPipeline:
    """A preset name or a list of pass names -> a validated ``MilPassPipeline``."""
    if isinstance(spec, str):
        if spec == "default":
            return MilPassPipeline("default", tuple(_upstream.default_pass_names()))
        if spec == "empty":
            return MilPassPipeline("empty", ())
        suggestion = did_you_mean(spec, PRESETS)
        raise PassPipelineError(
            f"unknown MIL pass pipeline preset '{spec}'.{suggestion} Presets: {list(PRESETS)}; "
            "or give a list of pass names."
        )
    passes = validate_pass_names(spec)
    if not passes:
        return MilPassPipeline("empty", ())
    return MilPassPipeline("custom", passes)
