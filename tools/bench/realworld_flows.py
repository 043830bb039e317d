"""The lowering flows `bench.realworld` times and ``tests/real_models`` compares, one per side.

Sides (`SIDES`):

* ``stock``: what an ExecuTorch user writes with the public API only (aot_arm_compiler's flow):
  export → quantize (the Arm / Core ML quantizer, ``prepare_pt2e``, calibrate, ``convert_pt2e``,
  re-export) → ``to_edge_transform_and_lower`` with the partitioner (built after quantization: the
  Arm quantizer adds ``transform_pipeline_config`` to the compile spec) → ``to_executorch``;
* ``dropin``: the same code inside lowerkit's drop-in accelerators (Arm: ``accelerated_arm_quantization()``
  (which holds ``accelerated_quantization()``) + ``accelerated_arm_pipeline()`` (which holds
  ``accelerated_lowering()``); Core ML: lowerkit's
  ``CoreMLQuantizer`` / ``CoreMLPartitioner`` for ExecuTorch's, inside ``accelerated_quantization()``
  + ``accelerated_lowering()``);
* ``api``: lowerkit's one call, ``lower_to_arm`` / ``lower_to_coreml``.

Every flow returns a `Lowered`: the ``.pte`` bytes, the delegates' payloads and per-stage seconds.
Core ML payloads are compared canonically (`canonical_payload`): ExecuTorch writes a random
identifier into each. lowerkit's and ExecuTorch's Core ML backends cannot share a process, so a
Core ML ``stock`` flow and a lowerkit one never run in the same interpreter.
"""

from __future__ import annotations

import contextlib
import hashlib
import importlib
import json
import pkgutil
import re
import tempfile
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import torch

__all__ = [
    "ARM_TARGETS",
    "COREML_TARGETS",
    "SIDES",
    "TARGETS",
    "ArmStock",
    "Lowered",
    "arm_payloads",
    "arm_public_api",
    "arm_stock",
    "arm_stock_quantized",
    "canonical_payload",
    "canonical_payload_digest",
    "lower",
    "preimport",
    "referenced_models",
]

ARM_TARGETS = ("TOSA-1.0+INT", "TOSA-1.0+FP", "ethos-u55-128", "ethos-u85-256")
#: Core ML targets, as the CLI names them: fp16, static int8 (iOS17), int8 weight-only (iOS17).
COREML_TARGETS = ("coreml-fp16", "coreml-int8", "coreml-w8")
TARGETS = ARM_TARGETS + COREML_TARGETS
SIDES = ("stock", "dropin", "api")

#: ExecuTorch's Core ML flows that quantize need iOS17 (its ``coreml_static_int8`` flow sets it).
COREML_INT8_TARGET = "iOS17"
INT8_WEIGHTS = {"mode": "linear_symmetric", "dtype": "int8", "granularity": "per_channel"}
#: Metadata keys of a Core ML model spec that are not the model: coremltools' conversion date and
#: lowerkit's pass-pipeline record (``lowerkit.coreml_preprocess.PIPELINE_METADATA_KEY``, written out:
#: that package cannot be imported in a process holding ExecuTorch's Core ML backend).
SPEC_METADATA_NOT_MODEL = ("com.github.apple.coremltools.conversion_date", "lowerkit.mil_pass_pipeline")


@dataclass
class Lowered:
    """One lowering's result: ``.pte`` bytes, delegate payloads (in graph order), stage seconds."""

    pte: bytes
    payloads: list[bytes]
    backend: str
    stages: dict[str, float] = field(default_factory=dict)
    #: Nodes of the program handed to ``to_edge_transform_and_lower`` (`bench.floors` scales a walk by it).
    lowering_input_nodes: int | None = None

    @property
    def pte_sha256(self) -> str:
        return hashlib.sha256(self.pte).hexdigest()

    def payload_digests(self) -> list[str]:
        """sha256 of each payload (Arm: TOSA flatbuffers or Vela binaries); Core ML: canonical."""
        if self.backend == "coreml":
            return [canonical_payload_digest(p) for p in self.payloads]
        return [hashlib.sha256(p).hexdigest() for p in self.payloads]


class _Clock:
    """Wall seconds per named stage (``with clock("export"): ...``)."""

    def __init__(self) -> None:
        self.stages: dict[str, float] = {}

    @contextlib.contextmanager
    def __call__(self, stage: str) -> Iterator[None]:
        start = time.perf_counter()
        try:
            yield
        finally:
            self.stages[stage] = self.stages.get(stage, 0.0) + time.perf_counter() - start


def _delegate_payloads(edge: Any) -> list[bytes]:
    from executorch.exir.lowered_backend_module import LoweredBackendModule

    module = edge.exported_program().graph_module
    return [bytes(m.processed_bytes) for _, m in module.named_children() if isinstance(m, LoweredBackendModule)]


def _quantized(
    program: torch.export.ExportedProgram, prepare: Callable[[torch.export.ExportedProgram], torch.fx.GraphModule],
    calibration: Sequence[tuple[Any, ...]],
) -> torch.fx.GraphModule:
    """``prepare(program)``, calibrated on `calibration`, through ``convert_pt2e``."""
    from torchao.quantization.pt2e.quantize_pt2e import convert_pt2e

    prepared = prepare(program)
    with torch.no_grad():
        for batch in calibration:
            prepared(*batch)
    return convert_pt2e(prepared)


def _public_flow(
    module: torch.nn.Module, inputs: tuple[Any, ...], calibration: Sequence[tuple[Any, ...]], clock: _Clock,
    backend: str, prepare: Callable[[torch.export.ExportedProgram], torch.fx.GraphModule] | None,
    partitioner: Callable[[], Any], quantization_scope: Callable[[], Any], lowering_scope: Callable[[], Any],
) -> Lowered:
    """Export → (`prepare` given: prepare, calibrate, ``convert_pt2e``, re-export) →
    ``to_edge_transform_and_lower`` with ``partitioner()`` (made after quantization) → ``to_executorch``.

    As the READMEs show the drop-in: the quantization block (export, quantize, re-export) inside
    ``quantization_scope()``, the lowering inside ``lowering_scope()``; without quantization the
    export is the first thing inside ``lowering_scope()``. Each scope is entered once.
    """
    from executorch.exir import to_edge_transform_and_lower

    if prepare is not None:
        with quantization_scope():
            with clock("export"):
                program = torch.export.export(module, inputs)
            with clock("quantize"):
                converted = _quantized(program, prepare, calibration)
            with clock("re-export"):
                program = torch.export.export(converted, inputs)
    with lowering_scope():
        if prepare is None:
            with clock("export"):
                program = torch.export.export(module, inputs)
        nodes = len(program.graph.nodes)  # off the clock (a stored count)
        with clock("to_edge_transform_and_lower"):
            edge = to_edge_transform_and_lower(program, partitioner=[partitioner()])
        payloads = _delegate_payloads(edge)
        with clock("to_executorch"):
            pte = bytes(edge.to_executorch().buffer)
    return Lowered(pte, payloads, backend, clock.stages, nodes)


# --- Arm --------------------------------------------------------------------------------------------------


#: The TOSA profile of each VGF target (aot_arm_compiler's ``vgf``: INT with ``--quantize``, else FP).
_VGF_PROFILES = {"vgf-int": "TOSA-1.0+INT", "vgf-fp": "TOSA-1.0+FP"}


@dataclass(frozen=True)
class ArmStock:
    """ExecuTorch's public Arm objects for one target: compile spec, quantizer and partitioner makers."""

    spec: Any
    #: A fresh quantizer with the symmetric int8 (or a16w8) config set globally; None: the target is float.
    quantizer: Callable[[], Any] | None
    partitioner: Callable[[], Any]


def arm_stock(
    target: str, *, a16w8: bool = False, system_config: str | None = None, memory_mode: str | None = None,
    config_ini: str | None = None,
) -> ArmStock:
    """The compile spec, quantizer and partitioner an ExecuTorch user builds for `target` (aot_arm_compiler's).

    Ethos-U: `system_config` / `memory_mode` (None: the target's defaults) and `config_ini` (None:
    Vela's ``Arm/vela.ini``); VGF: ``vgf-int`` / ``vgf-fp``; else a TOSA profile.
    """
    from executorch.backends.arm.ethosu import EthosUCompileSpec, EthosUPartitioner
    from executorch.backends.arm.quantizer import (
        EthosUQuantizer,
        TOSAQuantizer,
        VgfQuantizer,
        get_symmetric_a16w8_quantization_config,
        get_symmetric_quantization_config,
    )
    from executorch.backends.arm.tosa import TosaSpecification
    from executorch.backends.arm.tosa.compile_spec import TosaCompileSpec
    from executorch.backends.arm.tosa.partitioner import TOSAPartitioner
    from executorch.backends.arm.vgf import VgfCompileSpec, VgfPartitioner

    spec: Any
    if target.startswith("ethos-u"):
        ini = config_ini if config_ini is not None else "Arm/vela.ini"
        spec = EthosUCompileSpec(target, system_config=system_config, memory_mode=memory_mode, config_ini=ini)
        quantizer_class, partitioner_class = EthosUQuantizer, EthosUPartitioner
    elif target in _VGF_PROFILES:
        spec = VgfCompileSpec(TosaSpecification.create_from_string(_VGF_PROFILES[target]))
        quantizer_class, partitioner_class = VgfQuantizer, VgfPartitioner
    else:
        spec = TosaCompileSpec(target)
        quantizer_class, partitioner_class = TOSAQuantizer, TOSAPartitioner

    def quantizer() -> Any:
        made = quantizer_class(spec)
        made.set_global(get_symmetric_a16w8_quantization_config() if a16w8 else get_symmetric_quantization_config())
        return made

    floating = _VGF_PROFILES.get(target, target) == "TOSA-1.0+FP"
    return ArmStock(spec, None if floating else quantizer, lambda: partitioner_class(spec))


def _arm_prepare(stock: ArmStock) -> Callable[[torch.export.ExportedProgram], torch.fx.GraphModule] | None:
    from torchao.quantization.pt2e.quantize_pt2e import prepare_pt2e

    quantizer = stock.quantizer
    if quantizer is None:
        return None

    def prepare(program: torch.export.ExportedProgram) -> torch.fx.GraphModule:
        # check_guards=False as lower_to_arm: DecomposeLayerNormPass cannot take the _guards_fn node.
        return prepare_pt2e(program.module(check_guards=False), quantizer())

    return prepare


def arm_stock_quantized(
    module: torch.nn.Module, inputs: tuple[Any, ...], target: str, calibration: Sequence[tuple[Any, ...]],
    **settings: Any,
) -> torch.fx.GraphModule:
    """The fake-quantized module of stock's pt2e flow for an integer `target` (`arm_stock`'s `settings`)."""
    prepare = _arm_prepare(arm_stock(target, **settings))
    if prepare is None:
        raise ValueError(f"{target} lowers in float: nothing to quantize")
    return _quantized(torch.export.export(module, inputs), prepare, calibration)


def arm_public_api(
    module: torch.nn.Module, inputs: tuple[Any, ...], target: str, calibration: Sequence[tuple[Any, ...]],
    clock: _Clock | None = None, quantization_scope: Callable[[], Any] = contextlib.nullcontext,
    lowering_scope: Callable[[], Any] = contextlib.nullcontext, **settings: Any,
) -> Lowered:
    """aot_arm_compiler's flow with ExecuTorch's public API (`arm_stock`'s objects, its `settings`);
    the scopes wrap quantization / lowering (none: stock, the reference of every Arm sameness test)."""
    stock = arm_stock(target, **settings)
    return _public_flow(
        module, inputs, calibration, clock or _Clock(), "arm", _arm_prepare(stock), stock.partitioner,
        quantization_scope, lowering_scope,
    )


def arm_payloads(lowering: Any) -> list[bytes]:
    """An ``ArmLowering``'s delegate payloads as a `Lowered` holds them: Vela binaries (Ethos-U), VGF
    (VGF targets), else TOSA flatbuffers."""
    return list(lowering.vela_binaries or lowering.vgf_binaries or lowering.tosa_flatbuffers)


def _arm(side: str, module: torch.nn.Module, inputs: tuple[Any, ...], target: str,
         calibration: Sequence[tuple[Any, ...]]) -> Lowered:
    clock = _Clock()
    if side == "stock":
        return arm_public_api(module, inputs, target, calibration, clock)
    if side == "dropin":
        from lowerkit.arm_passes import accelerated_arm_pipeline, accelerated_arm_quantization

        return arm_public_api(module, inputs, target, calibration, clock, accelerated_arm_quantization,
                              accelerated_arm_pipeline)  # fmt: skip
    from lowerkit.arm_passes import lower_to_arm

    with clock("lower_to_arm"):
        result = lower_to_arm(module, inputs, target, calibration=calibration)
    return Lowered(result.pte, arm_payloads(result), "arm", clock.stages)


# --- Core ML ----------------------------------------------------------------------------------------------


def _coreml_options(target: str) -> dict[str, Any]:
    """``generate_compile_specs`` / ``CoreMLCompileOptions`` keywords per target (fp16 compute)."""
    if target == "coreml-int8":
        return {"minimum_deployment_target": COREML_INT8_TARGET}
    if target == "coreml-w8":
        return {"minimum_deployment_target": COREML_INT8_TARGET, "op_linear_quantizer_config": INT8_WEIGHTS}
    return {}


def coreml_public_api(
    module: torch.nn.Module, inputs: tuple[Any, ...], target: str, calibration: Sequence[tuple[Any, ...]],
    clock: _Clock, lowerkit: bool,
) -> Lowered:
    """Export → (int8: quantize, re-export) → to_edge_transform_and_lower → to_executorch.

    ``lowerkit=False``: ExecuTorch's ``CoreMLQuantizer`` / ``CoreMLPartitioner``; True: lowerkit's,
    with ``accelerated_quantization()`` and ``accelerated_lowering()`` around their stages.
    """
    from torchao.quantization.pt2e.quantize_pt2e import prepare_pt2e

    from lowerkit.coreml_quantizer.int8_config import static_int8_config

    options = _coreml_options(target)
    quantization_scope: Callable[[], Any] = contextlib.nullcontext
    lowering_scope: Callable[[], Any] = contextlib.nullcontext
    if lowerkit:
        from lowerkit.coreml_preprocess import CoreMLCompileOptions, CoreMLPartitioner
        from lowerkit.coreml_quantizer import CoreMLQuantizer
        from lowerkit.pass_infra import accelerated_lowering, accelerated_quantization

        partitioner = CoreMLPartitioner(compile_specs=CoreMLCompileOptions(compute_precision="float16", **options))
        quantizer_class: Any = CoreMLQuantizer
        quantization_scope, lowering_scope = accelerated_quantization, accelerated_lowering
    else:
        import coremltools as ct
        from executorch.backends.apple.coreml.compiler import CoreMLBackend
        from executorch.backends.apple.coreml.partition import CoreMLPartitioner as StockPartitioner
        from executorch.backends.apple.coreml.quantizer import CoreMLQuantizer as StockQuantizer

        kwargs = dict(options)
        if "minimum_deployment_target" in kwargs:
            kwargs["minimum_deployment_target"] = ct.target[kwargs["minimum_deployment_target"]]
        specs = CoreMLBackend.generate_compile_specs(compute_precision=ct.precision.FLOAT16, **kwargs)
        partitioner = StockPartitioner(compile_specs=specs)
        quantizer_class = StockQuantizer

    def prepare(program: torch.export.ExportedProgram) -> torch.fx.GraphModule:
        return prepare_pt2e(program.module(), quantizer_class(static_int8_config()))

    return _public_flow(
        module, inputs, calibration, clock, "coreml", prepare if target == "coreml-int8" else None,
        lambda: partitioner, quantization_scope, lowering_scope,
    )


def _coreml(side: str, module: torch.nn.Module, inputs: tuple[Any, ...], target: str,
            calibration: Sequence[tuple[Any, ...]]) -> Lowered:
    clock = _Clock()
    if side != "api":
        return coreml_public_api(module, inputs, target, calibration, clock, lowerkit=side == "dropin")
    from lowerkit.coreml_preprocess import lower_to_coreml

    recipe = {"coreml-fp16": "fp16", "coreml-int8": "int8", "coreml-w8": "w8"}[target]
    with clock("lower_to_coreml"):
        result = lower_to_coreml(module, inputs, recipe, calibration=calibration)
    return Lowered(result.pte, list(result.payloads), "coreml", clock.stages)


def lower(side: str, module: torch.nn.Module, inputs: tuple[Any, ...], target: str,
          calibration: Sequence[tuple[Any, ...]]) -> Lowered:
    """Lower `module` for `target` (`TARGETS`) the `side` way (`SIDES`)."""
    if side not in SIDES:
        raise ValueError(f"unknown side {side!r}; use one of {SIDES}")
    if target in COREML_TARGETS:
        return _coreml(side, module, inputs, target, calibration)
    if target in ARM_TARGETS:
        return _arm(side, module, inputs, target, calibration)
    raise ValueError(f"unknown target {target!r}; use one of {TARGETS}")


# --- Imports before the clock ---------------------------------------------------------------------------


#: What the stock flows import, per backend. Lowerkit's Arm sides import these too; its Core ML sides
#: import only `_SHARED_COREML_MODULES` of them: ExecuTorch's Core ML backend cannot share a process
#: with lowerkit's (``lowerkit.coreml_preprocess.conflict``).
_STOCK_MODULES = {
    "arm": (
        "executorch.backends.arm.ethosu.partitioner", "executorch.backends.arm.quantizer",
        "executorch.backends.arm.tosa.partitioner", "executorch.backends.arm.vgf",
    ),
    "coreml": (
        "coremltools", "executorch.backends.apple.coreml.compiler", "executorch.backends.apple.coreml.partition",
        "executorch.backends.apple.coreml.quantizer",
    ),
}  # fmt: skip
_SHARED_COREML_MODULES = ("coremltools", "executorch.backends.apple.coreml.quantizer")
#: The lowerkit packages each backend's lowerkit sides run (coreml-quantizer's config serves both sides).
_LOWERKIT_PACKAGES = {
    "arm": ("lowerkit.pass_infra", "lowerkit.arm_passes"),
    "coreml": ("lowerkit.pass_infra", "lowerkit.coreml_quantizer", "lowerkit.coreml_compiler_ops",
               "lowerkit.coreml_preprocess"),
}  # fmt: skip


def preimport(side: str, coreml: bool, *also: str) -> None:
    """Import what a timed flow will import (and the modules `also` names), so its clock does not pay it.

    On lowerkit's sides that is every module of the lowerkit packages the flow runs: the facades are
    lazy and the flows import inside functions, so importing a facade alone leaves lowerkit's imports on
    the clock. A stock Core ML side imports coreml-quantizer only (lowerkit's Core ML backend cannot
    share a process with ExecuTorch's). Importing a lowerkit module never applies a patch. A package's
    ``__main__`` is a command, not a module a flow imports: importing it would run it (and its imports,
    ExecuTorch's LLM tokenizers among them, add ~8 MB to the side's peak RSS).
    """
    backend = "coreml" if coreml else "arm"
    stock_modules = _SHARED_COREML_MODULES if coreml and side != "stock" else _STOCK_MODULES[backend]
    modules = ["executorch.exir", "torchao.quantization.pt2e.quantize_pt2e", *stock_modules, *also]
    packages = _LOWERKIT_PACKAGES[backend] if side != "stock" else ("lowerkit.coreml_quantizer",) if coreml else ()
    for package in packages:
        path = importlib.import_module(package).__path__
        found = (module.name for module in pkgutil.walk_packages(path, f"{package}."))
        modules += [package, *(name for name in found if not name.endswith(".__main__"))]
    for module in modules:
        importlib.import_module(module)


# --- The canonical Core ML payload ------------------------------------------------------------------------


#: A quoted string of protobuf's text format (escapes included).
_QUOTED = re.compile(r'"((?:[^"\\]|\\.)*)"')


def _generated_names(spec: Any) -> dict[str, str]:
    """Each ML Program value name, bar the functions' inputs and outputs, to ``%k`` in definition order.

    coremltools numbers the ops its passes create (``transpose_0`` ...) from one process-wide
    counter, and ``reduce_transposes`` visits them in set (memory-address) order: one program
    converted twice names them differently when the process's allocations differ. Stock
    ExecuTorch does that by itself: timm's EdgeNeXt to Core ML fp16 names two transposes the
    other way round after an unrelated allocation before the lowering. Values are named by
    where they are defined, so two programs differing only in those names compare equal.
    Functions and block specializations are protobuf maps, whose iteration order varies from
    process to process: they are visited in name order (a multifunction model's functions).
    """
    names: dict[str, str] = {}

    def visit(block: Any, kept: set[str]) -> None:
        for value in block.inputs:
            if value.name not in kept:
                names.setdefault(value.name, f"%{len(names)}")
        for operation in block.operations:
            for value in operation.outputs:
                if value.name not in kept:
                    names.setdefault(value.name, f"%{len(names)}")
            for inner in operation.blocks:
                visit(inner, kept)

    for _, function in sorted(spec.mlProgram.functions.items()):
        for _, block in sorted(function.block_specializations.items()):
            visit(block, {value.name for value in function.inputs} | set(block.outputs))
    return names


def _canonical_spec(data: bytes) -> tuple[bytes, dict[str, str]]:
    """The spec without what is not the model, its generated names canonical; and those names."""
    import coremltools as ct
    from google.protobuf import text_format  # type: ignore[import-untyped]

    spec = ct.proto.Model_pb2.Model()
    spec.ParseFromString(data)
    metadata = spec.description.metadata.userDefined
    for key in SPEC_METADATA_NOT_MODEL:
        if key in metadata:
            del metadata[key]
    names = _generated_names(spec)
    if names:
        text = _QUOTED.sub(lambda m: f'"{names.get(m.group(1), m.group(1))}"', text_format.MessageToString(spec))
        spec = text_format.Parse(text, ct.proto.Model_pb2.Model())
    return bytes(spec.SerializeToString(deterministic=True)), names


def _renamed(value: Any, names: dict[str, str]) -> Any:
    """`value` (parsed JSON) with each generated name, alone or as ``name:op``, canonical."""
    if isinstance(value, dict):
        return {_renamed(k, names): _renamed(v, names) for k, v in value.items()}
    if isinstance(value, list):
        return [_renamed(v, names) for v in value]
    if isinstance(value, str):
        name, colon, op = value.rpartition(":")
        if value in names:
            return names[value]
        if colon and name in names:
            return f"{names[name]}:{op}"
    return value


def canonical_payload(processed: bytes) -> dict[str, bytes]:
    """A Core ML payload's files, minus what is not the model (as tests/coreml_preprocess compares).

    The model spec serialized deterministically without the conversion date and lowerkit's pipeline
    record, the values coremltools names from a process-wide counter renamed by definition order
    (`_generated_names`), in the spec and in the debug maps; ``metadata.json`` without its
    ``identifier``; the package manifest's item entries without their ids (sorted); every other
    file (weights) as it is.
    """
    from executorch.backends.apple.coreml import executorchcoreml  # readable by both sides

    files: dict[str, bytes] = {}
    with tempfile.TemporaryDirectory() as tmp:
        executorchcoreml.unflatten_directory_contents(processed, tmp)
        root = Path(tmp)
        paths = sorted(p for p in root.rglob("*") if p.is_file())
        names: dict[str, str] = {}
        for path in paths:
            if path.name.endswith(".mlmodel"):
                files[str(path.relative_to(root))], found = _canonical_spec(path.read_bytes())
                names.update(found)
        for path in paths:
            name, data = str(path.relative_to(root)), path.read_bytes()
            if name.endswith(".mlmodel"):
                continue
            if name.endswith("metadata.json") and "mlpackage" not in name:
                meta = json.loads(data)
                meta.pop("identifier", None)
                data = json.dumps(meta, sort_keys=True).encode()
            elif name.endswith("Manifest.json"):
                entries = json.loads(data).get("itemInfoEntries", {}).values()
                data = json.dumps(sorted(json.dumps(e, sort_keys=True) for e in entries)).encode()
            elif name.endswith(".json"):  # debug_info.json, executorch_debug_handle_mapping.json
                data = json.dumps(_renamed(json.loads(data), names), sort_keys=True).encode()
            files[name] = data
    return dict(sorted(files.items()))


def referenced_models(pte: bytes) -> list[bytes]:
    """The Core ML model each delegate of the .pte `pte` references, in method order: a multifunction
    payload is a reference (``CMJR`` + JSON naming a key of the .pte's named data)."""
    from lowerkit.cli.pte_file import read_named_data, read_plans

    named = read_named_data(pte)
    return [named[json.loads(d.payload[4:])["key"]] for plan in read_plans(pte) for d in plan.delegates]


def canonical_payload_digest(processed: bytes) -> str:
    """sha256 over `canonical_payload` (names and contents)."""
    digest = hashlib.sha256()
    for name, data in canonical_payload(processed).items():
        digest.update(f"{name}\0{len(data)}\0".encode())
        digest.update(data)
    return digest.hexdigest()
