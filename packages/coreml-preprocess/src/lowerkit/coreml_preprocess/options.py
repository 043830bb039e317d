"""Typed Core ML compile options that round-trip to ExecuTorch ``CompileSpec`` lists.

Keys and value encodings are ExecuTorch 1.5.1's (``CoreMLBackend.generate_*_compile_spec``), so
a spec list made here lowers the same with ExecuTorch's backend and the reverse. lowerkit's own
option (``quantize_embedding_tables``) travels under the key ``lowerkit.quantize_embedding_tables``
and only when it is not the default: ExecuTorch's ahead-of-time backend looks up only the keys
it knows, and its Core ML runtime reads only ``compute_units``, so the extra key is inert there.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from enum import Enum
from typing import Any

import coremltools as ct
from executorch.exir.backend.compile_spec_schema import CompileSpec

from lowerkit.coreml_preprocess import _upstream
from lowerkit.coreml_preprocess.compression import WeightCompression
from lowerkit.coreml_preprocess.errors import CoreMLOptionsError
from lowerkit.coreml_preprocess.pass_pipeline import MilPassPipeline, resolve_pass_pipeline
from lowerkit.pass_infra.helpers.suggest import did_you_mean


class ModelType(Enum):
    """What the payload holds: the ``.mlpackage`` or the compiled ``.mlmodelc`` (macOS only)."""

    MODEL = "model"
    COMPILED_MODEL = "compiled_model"


class MultimethodWeightSharing(Enum):
    """How several methods' partitions combine (ExecuTorch's MULTIMETHOD_WEIGHT_SHARING_STRATEGY)."""

    DISABLED = "disabled"
    POSITIONAL = "positional"


class SpecKey(Enum):
    """Compile-spec keys: ExecuTorch's ``COMPILE_SPEC_KEYS`` plus lowerkit's own."""

    COMPUTE_UNITS = "compute_units"
    MODEL_TYPE = "model_type"
    MIN_DEPLOYMENT_TARGET = "min_deployment_target"
    MODEL_COMPUTE_PRECISION = "model_compute_precision"
    OP_LINEAR_QUANTIZER_CONFIG = "op_linear_quantizer_config"
    ENUMERATED_SHAPES = "enumerated_shapes"
    PASS_PIPELINE = "pass_pipeline"
    MULTIMETHOD_WEIGHT_SHARING_STRATEGY = "multimethod_weight_sharing_strategy"
    QUANTIZE_EMBEDDING_TABLES = "lowerkit.quantize_embedding_tables"
    WEIGHT_COMPRESSION = "lowerkit.weight_compression"


_VALID_KEYS = [k.value for k in SpecKey]


def _choice_error(what: str, value: object, valid: Sequence[str]) -> CoreMLOptionsError:
    hint = did_you_mean(value, valid, ignore_case=True)
    return CoreMLOptionsError(f"invalid {what} {value!r}.{hint} Valid values: {', '.join(valid)}.")


def _compute_unit(value: object) -> Any:
    valid = [u.name.lower() for u in ct.ComputeUnit]
    if isinstance(value, ct.ComputeUnit):
        return value
    if isinstance(value, str) and value.upper() in ct.ComputeUnit.__members__:
        return ct.ComputeUnit[value.upper()]
    raise _choice_error("compute_unit", value, valid)


def _target(value: object) -> Any:
    if value is None or isinstance(value, ct.target):
        return value
    members = ct.target.__members__
    if isinstance(value, str) and value in members:
        return members[value]
    if isinstance(value, int) and not isinstance(value, bool):
        try:
            return ct.target(value)
        except ValueError:
            pass
    raise _choice_error("minimum_deployment_target", value, ["None", *members])


def _precision(value: object) -> Any:
    valid = [p.value for p in ct.precision]
    if isinstance(value, ct.precision):
        return value
    if isinstance(value, str) and value in valid:
        return ct.precision(value)
    raise _choice_error("compute_precision", value, valid)


def _enum_value(enum: type[Enum], what: str, value: object) -> Any:
    valid = [m.value for m in enum]
    if isinstance(value, enum):
        return value
    if isinstance(value, str) and value in valid:
        return enum(value)
    # Accept ExecuTorch's own enums (same values) without importing them.
    inner = getattr(value, "value", None)
    if isinstance(inner, str) and inner in valid:
        return enum(inner)
    raise _choice_error(what, value, valid)


def _quantizer_config(value: object) -> dict[str, Any] | None:
    if value is None:
        return None
    if not isinstance(value, Mapping):
        raise CoreMLOptionsError(
            "op_linear_quantizer_config must be a dict of cto.coreml.OpLinearQuantizerConfig "
            f"fields (as ExecuTorch takes it), got {type(value).__name__}."
        )
    config = dict(value)
    try:
        json.dumps(config)
        _upstream.linear_quantizer_config_from_dict(config)
    except Exception as error:  # coremltools raises cattrs / attrs / ValueError / TypeError
        import coremltools.optimize as cto

        fields = [a.name for a in cto.coreml.OpLinearQuantizerConfig.__attrs_attrs__]
        raise CoreMLOptionsError(
            f"invalid op_linear_quantizer_config {config!r}: {error}. It must be a JSON-able dict "
            f"with keys among {fields}, e.g. {{'mode': 'linear_symmetric', 'dtype': 'int8', "
            "'granularity': 'per_channel'}."
        ) from None
    return config


def _shapes(value: object) -> dict[str, tuple[tuple[int, ...], ...]] | None:
    if value is None:
        return None
    if not isinstance(value, Mapping) or not value:
        raise CoreMLOptionsError(
            "enumerated_shapes must be a non-empty dict {input name: [shape, shape, ...]}, "
            f"got {value!r}."
        )
    result: dict[str, tuple[tuple[int, ...], ...]] = {}
    for name, shapes in value.items():
        try:
            result[str(name)] = tuple(tuple(int(d) for d in shape) for shape in shapes)
        except (TypeError, ValueError):
            raise CoreMLOptionsError(
                f"enumerated_shapes[{name!r}] must be a list of shapes (lists of ints), got {shapes!r}."
            ) from None
    return result


@dataclass(frozen=True)
class CoreMLCompileOptions:
    """Core ML compile options; field names and defaults are ExecuTorch's ``generate_compile_specs``."""

    compute_unit: Any = ct.ComputeUnit.ALL
    minimum_deployment_target: Any = None
    compute_precision: Any = ct.precision.FLOAT16
    model_type: ModelType = ModelType.MODEL
    #: A dict of ``cto.coreml.OpLinearQuantizerConfig`` fields, exactly as ExecuTorch takes it.
    op_linear_quantizer_config: Mapping[str, Any] | None = None
    #: ``"default"``, ``"empty"``, or a list of MIL pass names (validated; kept as a tuple).
    pass_pipeline: str | Sequence[str] = "default"
    #: ``{input name: [shape, ...]}``; needs ``lower_full_graph=True`` in the partitioner.
    enumerated_shapes: Mapping[str, Sequence[Sequence[int]]] | None = None
    #: Quantize every float embedding table with ``op_linear_quantizer_config`` (lowerkit only).
    quantize_embedding_tables: bool = False
    multimethod_weight_sharing_strategy: MultimethodWeightSharing = MultimethodWeightSharing.POSITIONAL
    #: Compression of every weighted op after conversion (lowerkit only; see ``compression``).
    weight_compression: WeightCompression | None = None
    _pipeline: MilPassPipeline = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        set_ = object.__setattr__
        set_(self, "compute_unit", _compute_unit(self.compute_unit))
        set_(self, "minimum_deployment_target", _target(self.minimum_deployment_target))
        set_(self, "compute_precision", _precision(self.compute_precision))
        set_(self, "model_type", _enum_value(ModelType, "model_type", self.model_type))
        set_(self, "op_linear_quantizer_config", _quantizer_config(self.op_linear_quantizer_config))
        pipeline = resolve_pass_pipeline(self.pass_pipeline)
        set_(self, "_pipeline", pipeline)
        set_(self, "pass_pipeline", pipeline.passes if pipeline.preset == "custom" else pipeline.preset)
        set_(self, "enumerated_shapes", _shapes(self.enumerated_shapes))
        if not isinstance(self.quantize_embedding_tables, bool):
            raise CoreMLOptionsError(
                f"quantize_embedding_tables must be True or False, got {self.quantize_embedding_tables!r}."
            )
        if self.quantize_embedding_tables and self.op_linear_quantizer_config is None:
            raise CoreMLOptionsError(
                "quantize_embedding_tables=True quantizes embedding tables with "
                "op_linear_quantizer_config, which is not set: set it too, e.g. "
                "{'mode': 'linear_symmetric', 'dtype': 'int8', 'granularity': 'per_channel'}."
            )
        if self.weight_compression is not None and not isinstance(self.weight_compression, WeightCompression):
            raise CoreMLOptionsError(
                "weight_compression must be a lowerkit.coreml_preprocess.WeightCompression, "
                f"got {type(self.weight_compression).__name__}."
            )
        set_(
            self,
            "multimethod_weight_sharing_strategy",
            _enum_value(
                MultimethodWeightSharing,
                "multimethod_weight_sharing_strategy",
                self.multimethod_weight_sharing_strategy,
            ),
        )

    @property
    def mil_pass_pipeline(self) -> MilPassPipeline:
        """The validated MIL pass pipeline these options select."""
        return self._pipeline

    def to_compile_specs(self, exported_program: Any = None) -> list[CompileSpec]:
        """ExecuTorch compile specs, in ``generate_compile_specs``' order and encodings (`_SPECS`).

        ``exported_program`` is needed only with ``enumerated_shapes`` (ExecuTorch encodes them
        against the program's symbolic shapes).
        """
        specs = []
        for spec in _SPECS:
            value = spec.encode(self, exported_program)
            if value is not None:
                specs.append(CompileSpec(spec.key.value, value.encode("utf-8")))
        return specs

    @classmethod
    def from_compile_specs(cls, specs: Sequence[CompileSpec]) -> CoreMLCompileOptions:
        """Options from ExecuTorch compile specs (ExecuTorch's or lowerkit's); strict about keys."""
        seen: dict[str, bytes] = {}
        for spec in specs:
            key = spec.key
            if key not in _VALID_KEYS:
                hint = did_you_mean(key, _VALID_KEYS)
                raise CoreMLOptionsError(
                    f"unknown Core ML compile spec key {key!r}.{hint} Valid keys: {', '.join(_VALID_KEYS)}."
                )
            if key in seen:
                raise CoreMLOptionsError(
                    f"compile spec key {key!r} appears twice; give each option once."
                )
            seen[key] = bytes(spec.value)
        kwargs: dict[str, Any] = {}
        for row in _SPECS:
            raw = seen.get(row.key.value)
            if raw is None:
                continue
            try:
                value = raw.decode("utf-8")
            except UnicodeDecodeError:
                raise CoreMLOptionsError(f"compile spec {row.key.value!r} is not UTF-8: {raw!r}.") from None
            kwargs[row.field] = row.decode(value)
        return cls(**kwargs)


@dataclass(frozen=True)
class _Spec:
    """One compile spec: its key, the option field it carries, and its text both ways."""

    key: SpecKey
    field: str
    #: The spec's text for these options (and the program, for enumerated shapes); None leaves it out.
    encode: Callable[[CoreMLCompileOptions, Any], str | None]
    #: The field's value from the spec's text (validated by ``CoreMLCompileOptions`` after).
    decode: Callable[[str], Any]


def _as_is(value: str) -> str:
    return value


def _encode_target(options: CoreMLCompileOptions, _program: Any) -> str:
    target = options.minimum_deployment_target
    return "" if target is None else str(target.value)


def _decode_target(value: str) -> Any:
    if value == "":
        return None
    try:
        return ct.target(int(value))
    except ValueError:
        raise _choice_error(
            "min_deployment_target spec value", value, ["", *(str(t.value) for t in ct.target)]
        ) from None


def _encode_shapes(options: CoreMLCompileOptions, exported_program: Any) -> str | None:
    if options.enumerated_shapes is None:
        return None
    if exported_program is None:
        raise CoreMLOptionsError(
            "enumerated_shapes are encoded against the exported program's symbolic shapes: "
            "call to_compile_specs(exported_program) with the program you will lower."
        )
    shapes = {k: [list(s) for s in v] for k, v in options.enumerated_shapes.items()}
    try:
        encoded: str = _upstream.encode_enumerated_shapes(exported_program, shapes)
    except (AssertionError, ValueError) as error:
        raise CoreMLOptionsError(f"invalid enumerated_shapes {shapes}: {error}") from None
    return encoded


def _decode_shapes(value: str) -> Any:
    try:
        return _upstream.enumerated_shape_names(value)
    except Exception as error:
        raise CoreMLOptionsError(f"compile spec 'enumerated_shapes' is not ExecuTorch's encoding: {error}") from None


def _decode_flag(value: str) -> bool:
    if value not in ("true", "false"):
        raise _choice_error("lowerkit.quantize_embedding_tables spec value", value, ["true", "false"])
    return value == "true"


def _encode_pipeline(options: CoreMLCompileOptions, _program: Any) -> str | None:
    pipeline = options.mil_pass_pipeline
    return None if pipeline.preset == "default" else json.dumps(list(pipeline.passes))


def _encode_strategy(options: CoreMLCompileOptions, _program: Any) -> str | None:
    strategy = options.multimethod_weight_sharing_strategy
    return None if strategy is MultimethodWeightSharing.POSITIONAL else strategy.value


#: Every compile spec, in ``generate_compile_specs``' order: what ``to_compile_specs`` writes
#: (the first four always, the rest when not the default) and ``from_compile_specs`` reads.
_SPECS: tuple[_Spec, ...] = (
    _Spec(SpecKey.COMPUTE_UNITS, "compute_unit", lambda o, _: o.compute_unit.name.lower(), _as_is),
    _Spec(SpecKey.MIN_DEPLOYMENT_TARGET, "minimum_deployment_target", _encode_target, _decode_target),
    _Spec(SpecKey.MODEL_COMPUTE_PRECISION, "compute_precision", lambda o, _: o.compute_precision.value, _as_is),
    _Spec(SpecKey.MODEL_TYPE, "model_type", lambda o, _: o.model_type.value, _as_is),
    _Spec(
        SpecKey.OP_LINEAR_QUANTIZER_CONFIG, "op_linear_quantizer_config",
        lambda o, _: None if o.op_linear_quantizer_config is None else json.dumps(dict(o.op_linear_quantizer_config)),
        lambda v: _json(SpecKey.OP_LINEAR_QUANTIZER_CONFIG, v, dict),
    ),
    _Spec(
        SpecKey.PASS_PIPELINE, "pass_pipeline", _encode_pipeline,
        lambda v: tuple(_json(SpecKey.PASS_PIPELINE, v, list)),
    ),
    _Spec(SpecKey.ENUMERATED_SHAPES, "enumerated_shapes", _encode_shapes, _decode_shapes),
    _Spec(SpecKey.MULTIMETHOD_WEIGHT_SHARING_STRATEGY, "multimethod_weight_sharing_strategy", _encode_strategy, _as_is),
    _Spec(
        SpecKey.QUANTIZE_EMBEDDING_TABLES, "quantize_embedding_tables",
        lambda o, _: "true" if o.quantize_embedding_tables else None, _decode_flag,
    ),
    _Spec(
        SpecKey.WEIGHT_COMPRESSION, "weight_compression",
        lambda o, _: None if o.weight_compression is None else o.weight_compression.to_json(),
        WeightCompression.from_json,
    ),
)  # fmt: skip


def _json(key: SpecKey, value: str, kind: type) -> Any:
    try:
        decoded = json.loads(value)
    except json.JSONDecodeError as error:
        raise CoreMLOptionsError(f"compile spec {key.value!r} is not JSON ({error}): {value!r}.") from None
    if not isinstance(decoded, kind):
        raise CoreMLOptionsError(
            f"compile spec {key.value!r} must hold a JSON {kind.__name__}, got {value!r}."
        )
    return decoded

