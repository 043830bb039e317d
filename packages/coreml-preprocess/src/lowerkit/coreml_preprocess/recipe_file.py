"""Compression recipes in a TOML file: a global setting and per-layer rules (``--recipe recipe.toml``).

    weight_threshold = 2048          # optional: weights with more elements are compressed

    [global]                         # optional: weights no rule selects
    method = "palettize"             # palettize | linear | prune | none
    nbits = 4
    granularity = "per_grouped_channel"
    group_size = 16

    [[rules]]
    name = "first conv and classifier stay fp16"
    regex = 'stem\\.0|fc'            # or match = "stack*.conv1.0" (glob); module paths
    method = "none"

    [[rules]]
    name = "depthwise 6-bit"
    op_type = "depthwise_conv"       # conv, depthwise_conv, conv_transpose, linear, matmul, gather, einsum
    method = "palettize"
    nbits = 6

Every mistake is one ``CoreMLOptionsError`` line naming the file and the rule.
"""

from __future__ import annotations

import json
import tomllib
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from lowerkit.coreml_preprocess._upstream import compressor_config_fields
from lowerkit.coreml_preprocess.compression import (
    METHODS,
    RESERVED_KEYS,
    WEIGHT_THRESHOLD,
    CompressionRule,
    WeightCompression,
)
from lowerkit.coreml_preprocess.errors import CoreMLOptionsError
from lowerkit.pass_infra.helpers.suggest import did_you_mean

__all__ = ["load_recipe", "parse_recipe", "recipe_toml"]

_TOP_KEYS = ("weight_threshold", "global", "rules")
_SELECTORS = ("name", "match", "regex", "op_type")


def load_recipe(path: Path | str) -> WeightCompression:
    """The WeightCompression a TOML recipe file describes."""
    path = Path(path)
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as error:
        raise CoreMLOptionsError(f"cannot read recipe file {path}: {error.strerror or error}.") from None
    return parse_recipe(text, source=str(path))


def parse_recipe(text: str, *, source: str = "recipe") -> WeightCompression:
    """The WeightCompression of a TOML recipe text; `source` names it in errors."""
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as error:
        raise CoreMLOptionsError(f"{source}: not valid TOML: {error}.") from None
    unknown = [k for k in data if k not in _TOP_KEYS]
    if unknown:
        raise CoreMLOptionsError(
            f"{source}: unknown key '{unknown[0]}'.{did_you_mean(unknown[0], list(_TOP_KEYS))} "
            f"Valid top-level keys: {', '.join(_TOP_KEYS)}."
        )
    rules_data = data.get("rules", [])
    if not isinstance(rules_data, list) or not all(isinstance(r, Mapping) for r in rules_data):
        raise CoreMLOptionsError(f"{source}: 'rules' must be an array of tables ([[rules]]).")
    global_data = data.get("global")
    if global_data is not None and not isinstance(global_data, Mapping):
        raise CoreMLOptionsError(f"{source}: 'global' must be a table ([global]).")
    try:
        rules = tuple(_rule(index, dict(r)) for index, r in enumerate(rules_data, start=1))
        return WeightCompression(
            dict(global_data) if global_data is not None else None,
            rules,
            data.get("weight_threshold", WEIGHT_THRESHOLD),
        )
    except CoreMLOptionsError as error:
        raise CoreMLOptionsError(f"{source}: {error}") from None


def _rule(index: int, data: dict[str, Any]) -> CompressionRule:
    name = data.pop("name", f"rules[{index}]")
    if not isinstance(name, str) or not name:
        raise CoreMLOptionsError(f"rules[{index}]: 'name' must be a non-empty string.")
    selectors = {k: data.pop(k) for k in ("match", "regex", "op_type") if k in data}
    for key, value in selectors.items():
        if not isinstance(value, str):
            raise CoreMLOptionsError(f"rule '{name}': '{key}' must be a string, got {value!r}.")
    if "method" not in data:
        near = did_you_mean(next(iter(data), ""), [*_SELECTORS, "method"]) if data else ""
        raise CoreMLOptionsError(f"rule '{name}' has no 'method' (palettize, linear, prune or none).{near}")
    method = data["method"]
    if method in METHODS:
        fields = [f for f in compressor_config_fields(method) if f not in RESERVED_KEYS] if method != "none" else []
        valid = [*_SELECTORS, "method", *fields]
        for given in data:
            if given not in valid and given not in RESERVED_KEYS:
                raise CoreMLOptionsError(
                    f"rule '{name}': unknown key '{given}'.{did_you_mean(given, valid)} Valid keys: {', '.join(valid)}."
                )
    try:
        return CompressionRule(name=name, config=data, **selectors)
    except CoreMLOptionsError as error:
        text = str(error)
        raise CoreMLOptionsError(text if text.startswith("rule '") else f"rule '{name}': {text}") from None


def _toml_value(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (int, float)):
        return repr(value)
    if isinstance(value, (list, tuple)):
        return "[" + ", ".join(_toml_value(v) for v in value) + "]"
    return json.dumps(str(value))  # a TOML basic string is a JSON string


def _table(config: Mapping[str, Any] | None) -> list[str]:
    if config is None:
        return ['method = "none"']
    return [f"{key} = {_toml_value(value)}" for key, value in config.items()]


def recipe_toml(compression: WeightCompression) -> str:
    """The TOML text of a WeightCompression (``parse_recipe`` gives it back), e.g. to save advice."""
    lines = [f"weight_threshold = {compression.weight_threshold}"]
    if compression.global_config is not None:
        lines += ["", "[global]", *_table(compression.global_config)]
    for rule in compression.rules:
        lines += ["", "[[rules]]", f"name = {_toml_value(rule.name)}"]
        for key in ("match", "regex", "op_type"):
            value = getattr(rule, key)
            if value is not None:
                lines.append(f"{key} = {_toml_value(value)}")
        lines += _table(rule.config)
    return "\n".join(lines) + "\n"
