"""Compression of every weighted op, applied to the converted MIL program as a compile option.

``WeightCompression`` travels in the compile specs under ``lowerkit.weight_compression`` (JSON),
so preprocess applies it and the payload and the ``.pte`` carry the compressed weights.
It is coremltools' ``ct.optimize.coreml`` (``palettize_weights``, ``linear_quantize_weights``,
``prune_weights``) on the ``MLModel`` preprocess converted, with one setting per weight chosen
by a global setting and rules that select layers by module path (glob or regex) and op type:

* ``{"method": "palettize", "nbits": 2|3|4|6|8, "granularity": "per_tensor" |
  "per_grouped_channel", "group_size": 16, ...}``: k-means (or ``"mode": "uniform"``) tables,
  deterministic (one k-means thread, coremltools' fixed seed);
* ``{"method": "linear", "dtype": "int8"|"int4", "granularity": "per_channel"|"per_block", ...}``;
* ``{"method": "prune", "target_sparsity": 0.5}`` (or ``n_m_ratio`` / ``block_size``);
* ``{"method": "none"}``: keep the weight as it is.

Other keys are the fields of coremltools' ``Op*Config`` (unknown ones are errors). Only weights
with more than ``weight_threshold`` elements are compressed, as coremltools does.
"""

from __future__ import annotations

import fnmatch
import json
import math
import re
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass, field, replace
from typing import Any

from lowerkit.coreml_preprocess import _upstream
from lowerkit.coreml_preprocess.errors import CoreMLLoweringError, CoreMLOptionsError
from lowerkit.coreml_preprocess.layer_paths import WeightReader, WeightUse, weight_uses
from lowerkit.pass_infra.helpers.suggest import did_you_mean

__all__ = [
    "METHODS",
    "OP_TYPES",
    "WEIGHT_THRESHOLD",
    "CompressionRule",
    "WeightCompression",
    "WeightDecision",
    "apply_weight_compression",
    "collecting_decisions",
]

METHODS = ("palettize", "linear", "prune", "none")
#: Op types a rule may select: MIL op types that read weights, plus ``depthwise_conv``.
OP_TYPES = ("conv", "depthwise_conv", "conv_transpose", "linear", "matmul", "gather", "einsum")
#: coremltools compresses only weights with more elements than this (its ``weight_threshold``
#: default); the recipes and a recipe file without ``weight_threshold`` use it.
WEIGHT_THRESHOLD = 2048
#: Ops whose weights coremltools can prune with block or n:m structure (OpMagnitudePrunerConfig).
_STRUCTURED_PRUNING_OPS = ("conv", "depthwise_conv", "linear")
#: Op types a user may name that have no weight of their own after conversion, and why.
_NOT_COMPRESSIBLE = {
    "batch_norm": "coremltools folds a batch norm into the conv before it (common::fuse_conv_batchnorm), "
    "so its parameters are that conv's weight and bias; select the conv",
    "embedding": "an embedding becomes a Core ML gather; use op_type 'gather'",
    "addmm": "it becomes a Core ML linear; use op_type 'linear'",
    "mm": "it becomes a Core ML linear or matmul; use op_type 'linear' or 'matmul'",
}
#: Keys lowerkit sets itself: the threshold is one setting, k-means runs in this process.
RESERVED_KEYS = ("weight_threshold", "num_kmeans_workers", "lut_function")
_PALETTE_BITS = (1, 2, 3, 4, 6, 8)


def _config(value: object, where: str) -> dict[str, Any] | None:
    """A validated, JSON-able setting; None for ``{"method": "none"}``."""
    if value is None:
        return None
    if not isinstance(value, Mapping):
        raise CoreMLOptionsError(f"{where}: a compression setting must be a table/dict, got {value!r}.")
    config = dict(value)
    method = config.get("method")
    if method not in METHODS:
        hint = did_you_mean(method, list(METHODS)) if isinstance(method, str) else ""
        raise CoreMLOptionsError(
            f"{where}: 'method' must be one of {', '.join(METHODS)}, got {method!r}.{hint}"
        )
    if method == "none":
        if len(config) > 1:
            raise CoreMLOptionsError(f"{where}: method 'none' takes no other keys, got {sorted(config)}.")
        return None
    for key in RESERVED_KEYS:
        if key in config:
            raise CoreMLOptionsError(
                f"{where}: '{key}' is set by lowerkit (weight_threshold is one global setting; "
                "k-means runs in-process, deterministically); remove it."
            )
    fields = {k: v for k, v in config.items() if k != "method"}
    valid = [f for f in _upstream.compressor_config_fields(method) if f not in RESERVED_KEYS]
    for key in fields:
        if key not in valid:
            raise CoreMLOptionsError(
                f"{where}: unknown key '{key}' for method '{method}'.{did_you_mean(key, valid)} "
                f"Valid keys: method, {', '.join(valid)}."
            )
    if method == "palettize":
        fields.setdefault("mode", "kmeans")
        if fields["mode"] not in ("kmeans", "uniform"):
            raise CoreMLOptionsError(f"{where}: palettize 'mode' must be 'kmeans' or 'uniform', got {fields['mode']!r}.")
        if fields.get("nbits") not in _PALETTE_BITS:
            raise CoreMLOptionsError(
                f"{where}: palettize needs 'nbits' in {list(_PALETTE_BITS)}, got {fields.get('nbits')!r}."
            )
    if method == "prune" and isinstance(fields.get("target_sparsity"), int):
        fields["target_sparsity"] = float(fields["target_sparsity"])
    try:
        json.dumps(fields)
        _upstream.compressor_config_from_dict(method, dict(fields))
    except Exception as error:  # cattrs / attrs raise several types
        detail = str(error).splitlines()[0] if str(error) else type(error).__name__
        raise CoreMLOptionsError(f"{where}: invalid {method} setting {fields}: {detail}") from None
    return {"method": method, **fields}


@dataclass(frozen=True)
class CompressionRule:
    """Layers selected by module path (glob or regex) and/or op type, and their setting (None: keep)."""

    name: str
    config: Mapping[str, Any] | None
    #: fnmatch glob over the layer's module path, e.g. ``"stack*.conv1.0"``.
    match: str | None = None
    #: Python regex, ``re.fullmatch`` over the module path, e.g. ``r"stem\\.0|fc"``.
    regex: str | None = None
    #: One of ``OP_TYPES``.
    op_type: str | None = None

    def __post_init__(self) -> None:
        where = f"rule '{self.name}'"
        if self.name == "global":
            raise CoreMLOptionsError("a rule cannot be named 'global' (the global setting's name); rename it.")
        if self.match is None and self.regex is None and self.op_type is None:
            raise CoreMLOptionsError(f"{where} selects nothing: give 'match', 'regex' or 'op_type'.")
        if self.match is not None and self.regex is not None:
            raise CoreMLOptionsError(f"{where} has both 'match' and 'regex': keep one.")
        if self.regex is not None:
            try:
                re.compile(self.regex)
            except re.error as error:
                raise CoreMLOptionsError(f"{where}: invalid regex {self.regex!r}: {error}.") from None
        if self.op_type in _NOT_COMPRESSIBLE:
            raise CoreMLOptionsError(
                f"{where}: Core ML does not compress {self.op_type} weights: {_NOT_COMPRESSIBLE[self.op_type]}."
            )
        if self.op_type is not None and self.op_type not in OP_TYPES:
            raise CoreMLOptionsError(
                f"{where}: unknown op_type {self.op_type!r}.{did_you_mean(self.op_type, list(OP_TYPES))} "
                f"Rules select the weights of: {', '.join(OP_TYPES)}."
            )
        config = _config(self.config, where)
        if config is not None and config["method"] == "prune" and _structured(config):
            if self.op_type is not None and self.op_type not in _STRUCTURED_PRUNING_OPS:
                raise CoreMLOptionsError(
                    f"{where}: Core ML cannot prune {self.op_type} weights with block or n:m structure "
                    f"(coremltools supports it for {', '.join(_STRUCTURED_PRUNING_OPS)} only); use target_sparsity alone."
                )
        object.__setattr__(self, "config", config)

    def selects(self, reader: WeightReader) -> bool:
        """Whether this rule applies to the weight as read by `reader`."""
        if self.op_type is not None and reader.op_type != self.op_type:
            return False
        if self.match is not None and not fnmatch.fnmatchcase(reader.module_path, self.match):
            return False
        return self.regex is None or re.fullmatch(self.regex, reader.module_path) is not None

    def to_json(self) -> dict[str, Any]:
        """The JSON form (the compile spec's)."""
        out: dict[str, Any] = {"name": self.name, "config": self.config}
        for key in ("match", "regex", "op_type"):
            if getattr(self, key) is not None:
                out[key] = getattr(self, key)
        return out


def _structured(config: Mapping[str, Any]) -> bool:
    return config.get("block_size") is not None or config.get("n_m_ratio") is not None


@dataclass(frozen=True)
class WeightCompression:
    """Compression of the converted program's weights: a global setting, rules, the size threshold."""

    #: The setting of weights no rule selects (None: keep them as they are).
    global_config: Mapping[str, Any] | None = None
    rules: Sequence[CompressionRule] = ()
    weight_threshold: int = WEIGHT_THRESHOLD

    def __post_init__(self) -> None:
        object.__setattr__(self, "global_config", _config(self.global_config, "global setting"))
        rules = tuple(self.rules)
        names = [r.name for r in rules]
        for name in names:
            if names.count(name) > 1:
                raise CoreMLOptionsError(f"two rules are named '{name}': give each rule its own name.")
        object.__setattr__(self, "rules", rules)
        threshold = self.weight_threshold
        if not isinstance(threshold, int) or isinstance(threshold, bool) or threshold < 0:
            raise CoreMLOptionsError(f"weight_threshold must be a non-negative integer, got {threshold!r}.")
        if self.global_config is None and all(r.config is None for r in rules):
            raise CoreMLOptionsError(
                "weight compression compresses nothing: set a global setting or a rule with a method "
                "other than 'none'."
            )

    def minimum_deployment_target(self) -> str:
        """The oldest deployment target whose Core ML stores every setting used ("iOS16" or "iOS18")."""
        configs = [self.global_config, *(r.config for r in self.rules)]
        for config in configs:
            if config is None:
                continue
            granularity = config.get("granularity", "per_tensor")
            if config["method"] == "palettize" and (granularity != "per_tensor" or config["nbits"] == 3):
                return "iOS18"
            if config["method"] == "linear" and (granularity == "per_block" or config.get("dtype") in ("int4", "uint4")):
                return "iOS18"
        return "iOS16"

    def to_json(self) -> str:
        """The compile spec value: deterministic JSON."""
        return json.dumps(
            {
                "global": self.global_config,
                "rules": [r.to_json() for r in self.rules],
                "weight_threshold": self.weight_threshold,
            },
            sort_keys=True,
        )

    @classmethod
    def from_json(cls, text: str) -> WeightCompression:
        """Back from ``to_json``; a CoreMLOptionsError naming the problem otherwise."""
        try:
            data = json.loads(text)
            unknown = set(data) - {"global", "rules", "weight_threshold"}
            if unknown:
                raise CoreMLOptionsError(f"unknown keys {sorted(unknown)}")
            rules = tuple(
                CompressionRule(
                    name=r["name"], config=r["config"], match=r.get("match"),
                    regex=r.get("regex"), op_type=r.get("op_type"),
                )
                for r in data.get("rules", [])
            )
            return cls(data.get("global"), rules, int(data.get("weight_threshold", WEIGHT_THRESHOLD)))
        except CoreMLOptionsError as error:
            raise CoreMLOptionsError(f"compile spec 'lowerkit.weight_compression': {error}") from None
        except (ValueError, TypeError, KeyError, AttributeError) as error:
            raise CoreMLOptionsError(
                f"compile spec 'lowerkit.weight_compression' is not lowerkit's encoding: {error!r}."
            ) from None


@dataclass(frozen=True)
class WeightDecision:
    """What compression did with one weight: its readers, the rule that chose (or "global"), the setting."""

    const_name: str
    shape: tuple[int, ...]
    readers: tuple[WeightReader, ...]
    rule: str
    config: Mapping[str, Any] | None
    #: False when the weight is not larger than the threshold (kept as it is).
    compressed: bool
    #: Every rule that selected one of its readers.
    matched: tuple[str, ...] = ()
    #: Why the setting differs from the one asked for, if it does.
    note: str = ""

    @property
    def weight_size(self) -> int:
        """Number of elements of the weight."""
        return math.prod(self.shape)


@dataclass
class _Collector:
    decisions: list[WeightDecision] = field(default_factory=list)


_DECISIONS: ContextVar[_Collector | None] = ContextVar("lowerkit_coreml_compression", default=None)


@contextmanager
def collecting_decisions() -> Iterator[list[WeightDecision]]:
    """Collect the per-weight decisions of the preprocess calls in this block (all partitions)."""
    collector = _Collector()
    token = _DECISIONS.set(collector)
    try:
        yield collector.decisions
    finally:
        _DECISIONS.reset(token)


def _describe(reader: WeightReader) -> str:
    return f"{reader.op_type} '{reader.module_path or reader.op_name}'"


def _decide(use: WeightUse, compression: WeightCompression) -> WeightDecision:
    chosen: list[tuple[str, Mapping[str, Any] | None, WeightReader]] = []
    matched: list[str] = []
    for reader in use.readers:
        matching = [r for r in compression.rules if r.selects(reader)]
        matched += [r.name for r in matching if r.name not in matched]
        for other in matching[1:]:
            if other.config != matching[0].config:
                raise CoreMLOptionsError(
                    f"rules '{matching[0].name}' and '{other.name}' both select {_describe(reader)} with "
                    "different settings; make their selections disjoint."
                )
        if matching:
            chosen.append((matching[0].name, matching[0].config, reader))
        else:
            chosen.append(("global", compression.global_config, reader))
    first_rule, first_config, first_reader = chosen[0]
    for rule, config, reader in chosen[1:]:
        if config != first_config:
            raise CoreMLOptionsError(
                f"weight {use.const_name} {list(use.shape)} is shared by {_describe(first_reader)} and "
                f"{_describe(reader)} (e.g. a tied embedding table), but {_label(first_rule)} and "
                f"{_label(rule)} give it different settings; give both readers the same setting."
            )
    if first_config is not None and first_config["method"] == "prune" and _structured(first_config):
        bad = [r for r in use.readers if r.op_type not in _STRUCTURED_PRUNING_OPS]
        if bad and use.size > compression.weight_threshold:
            raise CoreMLOptionsError(
                f"{_label(first_rule)}: Core ML cannot prune the weight of {_describe(bad[0])} with block or "
                f"n:m structure (coremltools supports {', '.join(_STRUCTURED_PRUNING_OPS)} only); select it "
                "with another rule or use target_sparsity alone."
            )
    compressed = first_config is not None and use.size > compression.weight_threshold
    decision = WeightDecision(
        use.const_name, use.shape, use.readers, first_rule, first_config, compressed, tuple(matched)
    )
    reason = _group_check(decision)
    if reason is None:
        return decision
    if first_rule != "global":
        raise CoreMLOptionsError(
            f"rule '{first_rule}': Core ML cannot palettize {_describe(use.readers[0])} per grouped channel: "
            f"{reason}; use another group_size or granularity 'per_tensor' for it."
        )
    assert first_config is not None
    per_tensor = {k: v for k, v in first_config.items() if k not in ("granularity", "group_size", "channel_axis")}
    return replace(decision, config=per_tensor, note=f"one table for the tensor: {reason}")


def _label(rule: str) -> str:
    return "the global setting" if rule == "global" else f"rule '{rule}'"


def decide(program: Any, edge_program: Any, compression: WeightCompression) -> list[WeightDecision]:
    """The setting of every float weight of `program` (errors for conflicting rules)."""
    return [_decide(use, compression) for use in weight_uses(program, edge_program)]


def _group_check(decision: WeightDecision) -> str | None:
    """Why Core ML would skip this weight under its setting (channels not divisible), or None."""
    config = decision.config
    if config is None or not decision.compressed:
        return None
    if config.get("method") != "palettize" or config.get("granularity") != "per_grouped_channel":
        return None
    size = config.get("group_size", 32)
    if any(r.op_type not in ("conv", "depthwise_conv", "linear") for r in decision.readers):
        return None  # coremltools picks another channel axis; it skips (and logs) what it cannot group
    if decision.shape and decision.shape[0] % int(size) != 0:
        return f"{decision.shape[0]} output channels are not divisible by group_size {size}"
    return None


def apply_weight_compression(mlmodel: Any, edge_program: Any, compression: WeightCompression) -> Any:
    """The MLModel with its weights compressed as `compression` says (coremltools' own passes)."""
    import coremltools.optimize as cto

    program = _upstream.mil_program(mlmodel)
    if program is None:
        raise CoreMLLoweringError("weight compression needs the converted MIL program; convert with ct.convert.")
    decisions = decide(program, edge_program, compression)
    collector = _DECISIONS.get()
    if collector is not None:
        collector.decisions.extend(decisions)
    functions = {
        "prune": cto.coreml.prune_weights,
        "palettize": cto.coreml.palettize_weights,
        "linear": cto.coreml.linear_quantize_weights,
    }
    for method, function in functions.items():
        selected = {
            d.const_name: _cto_config(d.config, compression.weight_threshold)
            for d in decisions
            if d.compressed and d.config is not None and d.config["method"] == method
        }
        if not selected:
            continue
        config = cto.coreml.OptimizationConfig(op_name_configs=selected)
        with _upstream.single_threaded_kmeans():
            mlmodel = function(mlmodel, config=config)
    return mlmodel


def _cto_config(config: Mapping[str, Any], threshold: int) -> Any:
    fields = {k: v for k, v in config.items() if k != "method"}
    fields["weight_threshold"] = threshold
    return _upstream.compressor_config_from_dict(str(config["method"]), fields)


def unmatched_rules(compression: WeightCompression, decisions: Sequence[WeightDecision]) -> list[str]:
    """Names of the rules that selected no weight."""
    used = {name for d in decisions for name in d.matched}
    return [r.name for r in compression.rules if r.name not in used]
