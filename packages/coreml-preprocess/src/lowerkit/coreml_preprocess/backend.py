"""lowerkit's ``CoreMLBackend``: ExecuTorch's Core ML backend ahead of time, deterministic.

Its backend id is ``CoreMLBackend`` (ExecuTorch finds a backend by class name), so the stock
ExecuTorch Core ML runtime loads the ``.pte`` files it produces. Importing this module when
ExecuTorch's own Core ML backend is loaded fails; the reverse fails at the next use, or at once
while a lowerkit Core ML step runs (see ``conflict``).
"""

from __future__ import annotations

import json
import logging
import tempfile
from pathlib import Path
from typing import Any, final

from executorch.exir.backend.backend_details import BackendDetails, PreprocessResult
from executorch.exir.backend.compile_spec_schema import CompileSpec

from lowerkit.coreml_preprocess import _upstream, capture, conflict
from lowerkit.coreml_preprocess.convert import convert_to_mlmodel
from lowerkit.coreml_preprocess.errors import CoreMLLoweringError
from lowerkit.coreml_preprocess.options import (
    CoreMLCompileOptions,
    ModelType,
    MultimethodWeightSharing,
    SpecKey,
)
from lowerkit.coreml_preprocess.package import (
    build_payload,
    content_uuid,
    deterministic_spec_bytes,
    digest_files,
    nest,
    read_tree,
    settle_manifest,
)
from lowerkit.coreml_preprocess.payload import flatten_tree
from lowerkit.coreml_preprocess.scope import coreml_scope

logger = logging.getLogger(__name__)

conflict.check_executorch_not_loaded()

#: Magic prefix of a multifunction reference payload ("CoreML JSON Reference"), as ExecuTorch's.
REFERENCE_MAGIC = b"CMJR"


@final
class CoreMLBackend(BackendDetails):
    """Core ML ``BackendDetails`` with backend id ``CoreMLBackend``; deterministic payloads."""

    #: ExecuTorch's ``CoreMLBackend.MODEL_TYPE`` (its compile-spec helpers, for code written against them).
    MODEL_TYPE = ModelType

    @staticmethod
    def generate_compile_specs(
        compute_unit: Any = None,
        minimum_deployment_target: Any = None,
        compute_precision: Any = None,
        model_type: ModelType = ModelType.MODEL,
        op_linear_quantizer_config: dict[str, Any] | None = None,
        pass_names: list[str] | None = None,
    ) -> list[CompileSpec]:
        """ExecuTorch's ``CoreMLBackend.generate_compile_specs``: the same specs, in its order and encodings."""
        defaults = CoreMLCompileOptions()
        return CoreMLCompileOptions(
            compute_unit=defaults.compute_unit if compute_unit is None else compute_unit,
            minimum_deployment_target=minimum_deployment_target,
            compute_precision=defaults.compute_precision if compute_precision is None else compute_precision,
            model_type=model_type,
            op_linear_quantizer_config=op_linear_quantizer_config,
            pass_pipeline="default" if pass_names is None else pass_names,
        ).to_compile_specs()

    @staticmethod
    def generate_multimethod_weight_sharing_strategy_compile_spec(strategy: Any) -> CompileSpec:
        """ExecuTorch's helper of that name: the spec of `strategy` (its enum or lowerkit's)."""
        value = MultimethodWeightSharing(strategy.value).value
        return CompileSpec(SpecKey.MULTIMETHOD_WEIGHT_SHARING_STRATEGY.value, value.encode("utf-8"))

    @staticmethod
    def preprocess(edge_program: Any, compile_specs: list[CompileSpec]) -> PreprocessResult:
        """Convert one partition to a Core ML payload the stock ExecuTorch runtime loads."""
        conflict.ensure_sole_backend(CoreMLBackend)
        with coreml_scope():
            return CoreMLBackend._preprocess_one(edge_program, compile_specs)

    @staticmethod
    def _preprocess_one(edge_program: Any, compile_specs: list[CompileSpec]) -> PreprocessResult:
        options = CoreMLCompileOptions.from_compile_specs(compile_specs)
        mlmodel = convert_to_mlmodel(
            edge_program,
            options,
            compile_specs=list(compile_specs),
            skip_model_load=options.model_type is not ModelType.COMPILED_MODEL,
        )
        built = build_payload(mlmodel, options.model_type)
        capture.record(mlmodel)
        return PreprocessResult(
            processed_bytes=built.processed_bytes, debug_handle_map=built.debug_handle_map
        )

    @classmethod
    def preprocess_multimethod(
        cls,
        edge_programs: dict[str, list[Any]],
        compile_specs: dict[str, list[list[CompileSpec]]],
    ) -> dict[str, list[PreprocessResult]]:
        """Several methods: combined into multifunction models (POSITIONAL) or independent."""
        conflict.ensure_sole_backend(CoreMLBackend)
        with coreml_scope():
            return cls._preprocess_methods(edge_programs, compile_specs)

    @classmethod
    def _preprocess_methods(
        cls,
        edge_programs: dict[str, list[Any]],
        compile_specs: dict[str, list[list[CompileSpec]]],
    ) -> dict[str, list[PreprocessResult]]:
        method_names = list(edge_programs)
        if len(method_names) <= 1:
            return super().preprocess_multimethod(edge_programs, compile_specs)
        first = method_names[0]
        first_options = CoreMLCompileOptions.from_compile_specs(compile_specs[first][0])
        if first_options.multimethod_weight_sharing_strategy is MultimethodWeightSharing.DISABLED:
            return super().preprocess_multimethod(edge_programs, compile_specs)
        count = len(edge_programs[first])
        for name, programs in edge_programs.items():
            if len(programs) != count:
                raise CoreMLLoweringError(
                    f"method '{name}' has {len(programs)} Core ML partitions but '{first}' has "
                    f"{count}: POSITIONAL weight sharing needs the same number in every method. "
                    "Set multimethod_weight_sharing_strategy='disabled' to lower them independently."
                )
        return _combine_methods(edge_programs, compile_specs, method_names, count, first_options)


def _combine_methods(
    edge_programs: dict[str, list[Any]],
    compile_specs: dict[str, list[list[CompileSpec]]],
    method_names: list[str],
    count: int,
    first_options: CoreMLCompileOptions,
) -> dict[str, list[PreprocessResult]]:
    import coremltools as ct

    store = _upstream.named_data_store()
    keys: list[str] = []
    with tempfile.TemporaryDirectory(prefix="lowerkit_coreml_mf_") as tmp:
        root = Path(tmp)
        paths: dict[str, list[Path]] = {name: [] for name in method_names}
        for name in method_names:
            for index, program in enumerate(edge_programs[name]):
                specs = compile_specs[name][index]
                mlmodel = convert_to_mlmodel(
                    program, CoreMLCompileOptions.from_compile_specs(specs),
                    compile_specs=list(specs), skip_model_load=True,
                )
                path = root / f"{name}_partition_{index}.mlpackage"
                mlmodel.save(str(path))
                paths[name].append(path)
        for index in range(count):
            descriptor = ct.utils.MultiFunctionDescriptor()
            for name in method_names:
                descriptor.add_function(
                    str(paths[name][index]), src_function_name="main", target_function_name=name
                )
            descriptor.default_function_name = method_names[0]
            combined = root / f"combined_partition_{index}.mlpackage"
            ct.utils.save_multifunction(descriptor, str(combined))
            if first_options.model_type is ModelType.COMPILED_MODEL:
                raise CoreMLLoweringError(
                    "model_type='compiled_model' with POSITIONAL multimethod weight sharing is not "
                    "supported by lowerkit; use model_type='model'."
                )
            package = read_tree(combined)
            spec_path = "Data/com.apple.CoreML/model.mlmodel"
            package[spec_path] = deterministic_spec_bytes(package[spec_path])
            settle_manifest(package)
            methods: dict[str, Any] = {}
            for name in method_names:
                spec = ct.models.MLModel(str(paths[name][index]), skip_model_load=True).get_spec()
                methods[name] = {
                    "inputNames": [i.name for i in spec.description.input],
                    "outputNames": [o.name for o in spec.description.output],
                }
            identifier = "executorch_" + content_uuid(
                "model.mlpackage", *digest_files(package), json.dumps(methods, sort_keys=True)
            )
            metadata = {"identifier": identifier, "methods": methods}
            tree: dict[str, Any] = {
                "model.mlpackage": nest(package),
                "metadata.json": json.dumps(metadata).encode("utf-8"),
            }
            key = f"coreml_{identifier}"
            store.add_named_data(key, flatten_tree(f"lowered_module_partition_{index}", tree))
            keys.append(key)
    output = store.get_named_data_store_output()
    results: dict[str, list[PreprocessResult]] = {name: [] for name in method_names}
    for index in range(count):
        for name in method_names:
            reference = {"version": 1, "key": keys[index], "functionName": name}
            results[name].append(
                PreprocessResult(
                    processed_bytes=REFERENCE_MAGIC + json.dumps(reference).encode("utf-8"),
                    debug_handle_map=None,
                    data_store_output=output,
                )
            )
    return results

