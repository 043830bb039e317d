"""ExecuTorch's CoreMLQuantizer as the reference for lowerkit's sameness tests.

The tests in tests/coreml_quantizer/ quantize every zoo model with every config twice in one
run, with ExecuTorch's ``CoreMLQuantizer`` and with lowerkit's (``prepare_pt2e`` or
``prepare_qat_pt2e``, calibration on the zoo's batches, ``convert_pt2e``), and compare the
converted graph's code plus a sha256 of every tensor it holds (``outcome``). Those outputs
depend on the CPU's float kernels, so they are never recorded; what is recorded is
code only: every pattern ExecuTorch's annotators trace, in order, with its graph code and
ops (goldens/patterns.json).

    python -m golden.coreml_quantizer                 # re-record patterns.json
    python -m golden.coreml_quantizer --compare [--models a,b] [--configs x,y]

The helpers here (configs, ``quantize``, ``fingerprint``) are shared with those tests.
"""

from __future__ import annotations

import argparse
import contextlib
import hashlib
import inspect
import json
import operator
import os
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import torch
import torch.nn.functional as F

DEFAULT_OUT = Path(__file__).resolve().parents[2] / "tests" / "coreml_quantizer" / "goldens"
CALIBRATION_BATCHES = 4

#: config name -> (ModuleLinearQuantizerConfig kwargs for the global config, QAT?)
_GLOBAL_CONFIGS: dict[str, tuple[dict[str, Any], bool]] = {
    "static_per_channel": (
        {
            "quantization_scheme": "symmetric",
            "activation_dtype": torch.quint8,
            "weight_dtype": torch.qint8,
            "weight_per_channel": True,
        },
        False,
    ),
    "static_per_tensor": (
        {
            "quantization_scheme": "affine",
            "activation_dtype": torch.quint8,
            "weight_dtype": torch.qint8,
            "weight_per_channel": False,
            "activation_observer": "min_max",
            "weight_observer": "min_max",
        },
        False,
    ),
    "weight_only": (
        {
            "quantization_scheme": "symmetric",
            "activation_dtype": torch.float32,
            "weight_dtype": torch.qint8,
            "weight_per_channel": True,
        },
        False,
    ),
    "qat": (
        {
            "quantization_scheme": "symmetric",
            "activation_dtype": torch.quint8,
            "weight_dtype": torch.qint8,
            "weight_per_channel": True,
        },
        True,
    ),
}
#: A config with module-type configs (exercises the node filters); ExecuTorch runs
#: one full annotation pass per type config, so it is recorded for two models only.
MIXED = "mixed_types"
CONFIG_NAMES: tuple[str, ...] = (*_GLOBAL_CONFIGS, MIXED)
MIXED_MODELS: tuple[str, ...] = ("conv_linear", "tiny_lm")


def make_config(name: str) -> Any:
    """A fresh coremltools LinearQuantizerConfig for the config called ``name``."""
    from coremltools.optimize.torch.quantization import (
        LinearQuantizerConfig,
        ModuleLinearQuantizerConfig,
    )

    if name == MIXED:
        return LinearQuantizerConfig(
            global_config=ModuleLinearQuantizerConfig(quantization_scheme="symmetric"),
            module_type_configs={
                torch.nn.Linear: ModuleLinearQuantizerConfig(
                    quantization_scheme="symmetric",
                    activation_dtype=torch.float32,
                    weight_per_channel=False,
                ),
                "Conv2d": None,
            },
        )
    kwargs, _ = _GLOBAL_CONFIGS[name]
    return LinearQuantizerConfig(global_config=ModuleLinearQuantizerConfig(**kwargs))


def is_qat(name: str) -> bool:
    """True for the configs prepared with ``prepare_qat_pt2e``."""
    return name != MIXED and _GLOBAL_CONFIGS[name][1]


def cases() -> list[tuple[str, str]]:
    """Every (zoo model, config) pair with a golden, in a stable order."""
    from lowerkit import zoo

    coreml = [m.name for m in zoo.models() if "coreml" in m.backends]
    return [
        (model, config)
        for model in coreml
        for config in CONFIG_NAMES
        if config != MIXED or model in MIXED_MODELS
    ]


@contextlib.contextmanager
def single_thread() -> Iterator[None]:
    """Run torch on one thread, so observer statistics do not depend on the thread count."""
    previous = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        yield
    finally:
        torch.set_num_threads(previous)


def quantize(model_name: str, config_name: str, make_quantizer: Callable[[Any], Any]) -> Any:
    """Export the zoo model, prepare with ``make_quantizer(config)``, calibrate and convert."""
    from torchao.quantization.pt2e.quantize_pt2e import (
        convert_pt2e,
        prepare_pt2e,
        prepare_qat_pt2e,
    )

    from lowerkit import zoo

    entry = zoo.get(model_name)
    with single_thread(), torch.no_grad():
        exported = torch.export.export(entry.module(), entry.example_inputs()).module()
        quantizer = make_quantizer(make_config(config_name))
        prepare = prepare_qat_pt2e if is_qat(config_name) else prepare_pt2e
        prepared = prepare(exported, quantizer)
        for batch in entry.calibration(CALIBRATION_BATCHES, seed=1):
            prepared(*batch)
        return convert_pt2e(prepared)


def outcome(
    model_name: str, config_name: str, make_quantizer: Callable[[Any], Any]
) -> dict[str, Any]:
    """`fingerprint` of the converted model, or ``{"error": ...}`` if quantizing it fails.

    (Some cases fail upstream, e.g. calibrating a model whose attention mask holds
    -inf with activation fake-quantization; lowerkit must fail the same way.)
    """
    try:
        converted = quantize(model_name, config_name, make_quantizer)
    except Exception as error:
        return {"error": f"{type(error).__name__}: {error}"}
    return fingerprint(converted)


def _resolve(module: torch.nn.Module, target: str) -> Any:
    value: Any = module
    for part in target.split("."):
        value = getattr(value, part)
    return value


def tensor_digest(tensor: torch.Tensor) -> str:
    """dtype, shape and sha256 of a tensor's bytes, as one line."""
    data = tensor.detach().contiguous().cpu()
    raw = data.view(torch.uint8) if data.dtype != torch.bool else data.to(torch.uint8)
    digest = hashlib.sha256(raw.numpy().tobytes()).hexdigest()
    return f"{str(data.dtype).removeprefix('torch.')} {list(data.shape)} {digest}"


def fingerprint(graph_module: Any) -> dict[str, Any]:
    """The converted graph's code and a digest of every tensor it holds, by name (sorted)."""
    tensors: dict[str, str] = {}
    for name, tensor in graph_module.state_dict(keep_vars=True).items():
        tensors[name] = tensor_digest(tensor)
    for node in graph_module.graph.nodes:
        if node.op == "get_attr":
            value = _resolve(graph_module, node.target)
            if isinstance(value, torch.Tensor):
                tensors[node.target] = tensor_digest(value)
    return {"code": graph_module.code, "tensors": dict(sorted(tensors.items()))}


# --- ExecuTorch's patterns -------------------------------------------------------

_NAMESPACES: tuple[tuple[str, Any], ...] = (
    ("operator", operator),
    ("torch.nn.functional", F),
    ("torch", torch),
)


def function_name(fn: Any) -> Any:
    """A stable name for a pattern argument: functions by qualified name, the rest as is."""
    if not callable(fn):
        return fn
    for prefix, namespace in _NAMESPACES:
        for name in sorted(dir(namespace), key=lambda n: (n.startswith("_"), n)):
            if getattr(namespace, name, None) is fn:
                return f"{prefix}.{name}"
    raise ValueError(f"no stable name for {fn!r}")


PATTERN_GETTERS = (
    "get_conv_pattern",
    "get_conv_bn_pattern",
    "get_linear_pattern",
    "get_linear_bn_pattern",
    "get_binary_op_act_pattern",
)


def pattern_descriptor(
    getter: Callable[..., Any], args: tuple[Any, ...], kwargs: dict[str, Any]
) -> list[Any]:
    """[getter name, every argument by position with defaults applied, functions named]."""
    bound = inspect.signature(getter).bind(*args, **kwargs)
    bound.apply_defaults()
    return [getter.__name__, *[function_name(v) for v in bound.arguments.values()]]


#: Pristine upstream patterns by descriptor (for ``upstream_pattern_getters(memoize=True)``).
_PATTERN_MEMO: dict[str, Any] = {}


@contextlib.contextmanager
def upstream_pattern_getters(
    on_build: Callable[[list[Any], Any], None] | None = None, memoize: bool = False
) -> Iterator[None]:
    """Wrap ExecuTorch's pattern getters: report each pattern built and, if ``memoize``,
    trace each distinct pattern once and hand out deep copies (as executorch PR #23323).

    Memoizing changes no output (the pattern depends on the getter's arguments only,
    and each caller gets its own copy); it takes upstream's prepare from 30-45 s to
    about a second, which makes recording every golden affordable. The live test in
    tests/coreml_quantizer runs upstream unpatched.
    """
    import copy

    import executorch.backends.apple.coreml.quantizer._coreml_quantizer_utils as utils

    originals = {name: getattr(utils, name) for name in PATTERN_GETTERS}
    memo = _PATTERN_MEMO

    def wrap(getter: Callable[..., Any]) -> Callable[..., Any]:
        def wrapped(*args: Any, **kwargs: Any) -> Any:
            descriptor = pattern_descriptor(getter, args, kwargs)
            key = json.dumps(descriptor)
            if memoize and key in memo:
                return copy.deepcopy(memo[key])
            pattern = getter(*args, **kwargs)
            if on_build is not None:
                on_build(descriptor, pattern)
            if memoize:
                memo[key] = copy.deepcopy(pattern)
            return pattern

        return wrapped

    try:
        for name, getter in originals.items():
            setattr(utils, name, wrap(getter))
        yield
    finally:
        for name, getter in originals.items():
            setattr(utils, name, getter)


def seed_pattern_memo(descriptor: list[Any], pattern: Any) -> None:
    """An ``on_build`` for `upstream_pattern_getters`: keep a deep copy of the first trace of each
    pattern, so that a later ``memoize=True`` run hands out copies of these very traces instead of
    tracing each pattern again (the memo's own first trace is the same kind of trace)."""
    import copy

    key = json.dumps(descriptor)
    if key not in _PATTERN_MEMO:
        _PATTERN_MEMO[key] = copy.deepcopy(pattern)


def record_upstream_patterns() -> list[dict[str, Any]]:
    """Every pattern ExecuTorch traces for one global-config annotation, in order."""
    from executorch.backends.apple.coreml.quantizer import CoreMLQuantizer

    from lowerkit import zoo

    records: list[dict[str, Any]] = []

    def record(descriptor: list[Any], pattern: Any) -> None:
        targets = sorted(str(n.target) for n in pattern.graph.nodes if n.op == "call_function")
        records.append({"pattern": descriptor, "ops": targets, "code": pattern.code})

    with upstream_pattern_getters(on_build=record):
        entry = zoo.get("conv_linear")
        exported = torch.export.export(entry.module(), entry.example_inputs()).module()
        CoreMLQuantizer(make_config("static_per_channel")).annotate(exported)
    return records


# --- writing ---------------------------------------------------------------------


def write_json(path: Path, payload: Any) -> None:
    """Write ``payload`` as sorted, indented JSON, atomically."""
    path.parent.mkdir(parents=True, exist_ok=True)
    text = json.dumps(payload, indent=1, sort_keys=True) + "\n"
    with tempfile.NamedTemporaryFile("w", dir=path.parent, delete=False, suffix=".tmp") as out:
        out.write(text)
    os.chmod(out.name, 0o644)
    os.replace(out.name, path)


def versions() -> dict[str, str]:
    """The versions goldens were recorded with."""
    import coremltools
    import torchao
    from executorch.version import __version__ as executorch_version

    return {
        "torch": torch.__version__,
        "torchao": torchao.__version__,
        "coremltools": coremltools.__version__,
        "executorch": executorch_version,
    }


def main(argv: list[str] | None = None) -> None:
    """Record patterns.json; with --compare, quantize cases with both quantizers side by side."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=DEFAULT_OUT)
    parser.add_argument(
        "--compare",
        action="store_true",
        help="quantize every (model, config) case with ExecuTorch's and lowerkit's quantizers "
        "and report SAME / DIFFERENT (exit code: the number of differences)",
    )
    parser.add_argument("--models", help="with --compare: comma-separated zoo models (default: all)")
    parser.add_argument("--configs", help="with --compare: comma-separated configs (default: all)")
    args = parser.parse_args(argv)

    if args.compare:
        sys.exit(compare(args.models, args.configs))
    start = time.perf_counter()
    patterns = record_upstream_patterns()
    write_json(args.out / "patterns.json", {"versions": versions(), "patterns": patterns})
    print(f"patterns.json: {len(patterns)} patterns ({time.perf_counter() - start:.1f} s)", flush=True)


def compare(models_arg: str | None, configs_arg: str | None) -> int:
    """Quantize each case with upstream (memoized getters) and lowerkit; count the differences."""
    from executorch.backends.apple.coreml.quantizer import CoreMLQuantizer as Upstream

    from lowerkit.coreml_quantizer import CoreMLQuantizer

    models = set(models_arg.split(",")) if models_arg else None
    configs = set(configs_arg.split(",")) if configs_arg else None
    differences = 0
    for model, config in cases():
        if (models and model not in models) or (configs and config not in configs):
            continue
        start = time.perf_counter()
        with upstream_pattern_getters(memoize=True):
            expected = outcome(model, config, Upstream)
        actual = outcome(model, config, CoreMLQuantizer)
        verdict = "SAME" if actual == expected else "DIFFERENT"
        differences += verdict != "SAME"
        print(f"{model:<20} {config:<20} {time.perf_counter() - start:6.1f} s {verdict}", flush=True)
    return differences


if __name__ == "__main__":
    main()
