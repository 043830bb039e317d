"""Every reach into ExecuTorch's and coremltools' private names, in one place.

A version bump of either library is one file to read: this one (and the upstream functions
whose source hashes ``tests/coreml_preprocess_tests/test_upstream_sources.py`` holds).
Proven on the versions in ``lowerkit.coreml_preprocess.versions.PROVEN_ON``.
"""

from __future__ import annotations

import functools
import importlib
import importlib.util
import os
import sys
from pathlib import Path
from types import ModuleType
from typing import Any

import coremltools as ct
import executorch.exir.backend.backend_details as _backend_details
from coremltools.converters.mil.mil.passes.pass_registry import PASS_REGISTRY
from torch._ops import OpOverload as OpOverload

from lowerkit.pass_infra.helpers.stand_ins import modules_standing_in

#: ExecuTorch's module that defines its own ``CoreMLBackend`` (must not share a process with ours).
EXECUTORCH_COREML_PREPROCESS_MODULE = "executorch.backends.apple.coreml.compiler.coreml_preprocess"
#: ExecuTorch's Core ML packages whose import defines that class.
EXECUTORCH_COREML_PACKAGES = (
    "executorch.backends.apple.coreml.compiler",
    "executorch.backends.apple.coreml.partition",
    "executorch.backends.apple.coreml.recipes",
)


def backend_details_class() -> type:
    """ExecuTorch's ``BackendDetails`` base class."""
    return _backend_details.BackendDetails


def registered_pass_names() -> frozenset[str]:
    """Names of all MIL graph passes in coremltools' pass registry."""
    return frozenset(PASS_REGISTRY.passes)


def default_pass_names() -> list[str]:
    """The passes of coremltools' default MIL pipeline (``ct.PassPipeline.DEFAULT``)."""
    return list(ct.PassPipeline.DEFAULT.passes)


def linear_quantizer_config_from_dict(config: dict[str, Any]) -> Any:
    """``cto.coreml.OpLinearQuantizerConfig._from_dict``, as ExecuTorch decodes the compile spec."""
    import coremltools.optimize as cto

    return cto.coreml.OpLinearQuantizerConfig._from_dict(config)


def mil_program(mlmodel: Any) -> Any:
    """The pymil ``Program`` a converted ``MLModel`` keeps (``None`` when it has none)."""
    return getattr(mlmodel, "_mil_program", None)


def model_package_path(mlmodel: Any) -> str:
    """The directory of the temporary ``.mlpackage`` backing a converted ``MLModel``."""
    return str(mlmodel.package_path)


_ENUMERATED_SHAPE_UTILS = "lowerkit.coreml_preprocess._executorch_enumerated_shape_utils"


def enumerated_shape_utils() -> ModuleType:
    """ExecuTorch's ``enumerated_shape_utils`` module, loaded from its file.

    Importing it by its dotted name would run ``executorch.backends.apple.coreml.compiler``'s
    ``__init__``, which defines ExecuTorch's own ``CoreMLBackend``; the file itself only needs
    torch and coremltools, so it is loaded on its own under a private name.
    """
    loaded = sys.modules.get(_ENUMERATED_SHAPE_UTILS)
    if loaded is not None:
        return loaded
    import executorch

    roots = list(executorch.__path__)
    for root in roots:
        path = Path(root) / "backends" / "apple" / "coreml" / "compiler" / "enumerated_shape_utils.py"
        if path.is_file():
            spec = importlib.util.spec_from_file_location(_ENUMERATED_SHAPE_UTILS, path)
            assert spec is not None and spec.loader is not None
            module = importlib.util.module_from_spec(spec)
            sys.modules[_ENUMERATED_SHAPE_UTILS] = module
            spec.loader.exec_module(module)
            return module
    raise ImportError(
        "executorch's backends/apple/coreml/compiler/enumerated_shape_utils.py was not found "
        f"under {roots}; enumerated shapes need executorch 1.5.x installed."
    )


def encode_enumerated_shapes(exported_program: Any, shapes: dict[str, list[list[int]]]) -> str:
    """ExecuTorch's JSON encoding of enumerated shapes (needs the exported program's symbols)."""
    module = enumerated_shape_utils()
    emap = module._SymbolicShapeToEnumeratedShapeMap.from_exported_program(exported_program, shapes)
    return str(emap.to_json())


def decode_enumerated_shapes(encoded: str) -> Any:
    """ExecuTorch's ``_SymbolicShapeToEnumeratedShapeMap`` from its JSON encoding."""
    return enumerated_shape_utils()._SymbolicShapeToEnumeratedShapeMap.from_json(encoded)


def enumerated_shape_names(encoded: str) -> dict[str, list[list[int]]]:
    """``{input name: enumerations}`` from ExecuTorch's JSON encoding."""
    emap = decode_enumerated_shapes(encoded)
    result: dict[str, list[list[int]]] = {}
    for enumerations, names in emap.emap.values():
        for name in names:
            result[name] = [list(shape) for shape in enumerations]
    return result


def coreml_inputs_for_enumerated_shapes(exported_program: Any, encoded: str) -> list[Any]:
    """ExecuTorch's ``_get_ct_inputs``: ``ct.TensorType`` inputs with ``ct.EnumeratedShapes``."""
    module = enumerated_shape_utils()
    return list(module._get_ct_inputs(exported_program, decode_enumerated_shapes(encoded)))


def edge_ops() -> Any:
    """``executorch.exir.dialects._ops.ops`` (the ``exir_ops`` namespace)."""
    from executorch.exir.dialects._ops import ops

    return ops


def is_view_op(op: Any) -> bool:
    """ExecuTorch's check: the op's first argument is aliased and not written (a view)."""
    schema = op._schema
    if len(schema.arguments) == 0:
        return False
    alias_info = schema.arguments[0].alias_info
    return (alias_info is not None) and (not alias_info.is_write)


@functools.cache
def _program_module_file() -> str:
    import executorch.exir.program._program as program_module

    return os.path.normcase(os.path.realpath(program_module.__file__ or ""))


def called_from_deprecated_to_backend() -> bool:
    """ExecuTorch's ``_check_if_called_from_to_backend``, without ``inspect.stack()``.

    True when ``to_backend`` of ExecuTorch's ``exir/program/_program.py`` module (the same
    file, compared by path, not by a substring) is on the stack and no function named
    ``to_edge_transform_and_lower`` is.
    """
    program_file = _program_module_file()
    frame: Any = sys._getframe(1)
    seen_to_backend = False
    while frame is not None:
        code = frame.f_code
        if code.co_name == "to_edge_transform_and_lower":
            return False
        if (
            code.co_name == "to_backend"
            and os.path.normcase(os.path.realpath(code.co_filename)) == program_file
        ):
            seen_to_backend = True
        frame = frame.f_back
    return seen_to_backend


def torch_op_supported(node: Any) -> bool:
    """coremltools' ``is_torch_fx_node_supported`` (registered torch op translations)."""
    from coremltools.converters.mil.frontend.torch import is_torch_fx_node_supported

    return bool(is_torch_fx_node_supported(node))


def reset_conversion_state() -> None:
    """coremltools' ``_reset_conversion_state``: restart the MIL builder's auto-name counters.

    ``ct.convert`` resets them only after converting, so MIL built in between (by another
    library, a test, a compression pass) would renumber the next model's auto-named ops.
    """
    from coremltools.converters.mil.converter import _reset_conversion_state

    _reset_conversion_state()


def named_data_store() -> Any:
    """A new ``executorch.exir._serialize._named_data_store.NamedDataStore``."""
    from executorch.exir._serialize._named_data_store import NamedDataStore

    return NamedDataStore()


def exir_debug_handles(op: Any) -> list[int]:
    """The ExecuTorch debug handles a MIL op keeps from its edge nodes (``ScopeSource.EXIR_DEBUG_HANDLE``)."""
    from coremltools.converters.mil.mil.scope import ScopeSource

    return [int(h) for h in op.scopes.get(ScopeSource.EXIR_DEBUG_HANDLE, []) if h is not None]


def is_float_weight(value: Any) -> bool:
    """Whether a const value is a float array coremltools' compression would consider (>= 10 elements)."""
    import numpy as np

    return isinstance(value, np.ndarray) and value.dtype in (np.float16, np.float32) and value.size >= 10


def _compressor_class(kind: str) -> Any:
    import coremltools.optimize as cto

    classes = {
        "palettize": cto.coreml.OpPalettizerConfig,
        "linear": cto.coreml.OpLinearQuantizerConfig,
        "prune": cto.coreml.OpMagnitudePrunerConfig,
    }
    return classes[kind]


def compressor_config_from_dict(kind: str, config: dict[str, Any]) -> Any:
    """``cto.coreml.Op{Palettizer,LinearQuantizer,MagnitudePruner}Config._from_dict`` (unknown keys raise)."""
    return _compressor_class(kind)._from_dict(config)


def compressor_config_fields(kind: str) -> list[str]:
    """The field names of that coremltools config class."""
    return [a.name for a in _compressor_class(kind).__attrs_attrs__]


def single_threaded_kmeans() -> Any:
    """A context in which scikit-learn's k-means runs on one thread (OpenMP and BLAS).

    coremltools clusters small weights (and every group of a grouped palettization) with
    ``sklearn.cluster.KMeans(random_state=0, n_init=1)``, which is seeded but sums its
    per-thread partial centroids in whatever order the threads finish: with one thread the
    tables are the same on every run, whatever the number of cores. BLAS (k-means++ seeding and the
    distance products) is held to one thread too: its blocking, hence its rounding, depends on
    the thread count. Large fp16 weights go to coremltools' exact 1-D k-means (``kmeans1d``),
    which is deterministic anyway.
    """
    from threadpoolctl import threadpool_limits

    return threadpool_limits(limits=1)


#: ExecuTorch's export of an LLM with static attention to Core ML (prefill + decode methods).
STATIC_LLM_SCRIPT = "executorch.examples.apple.coreml.llama.export_static_llm_coreml"
_STATIC_LLM_SCRIPT_PRIVATE = "lowerkit.coreml_preprocess._executorch_export_static_llm_coreml"
#: ExecuTorch's Core ML modules that script imports names from, by module.
STATIC_LLM_SCRIPT_IMPORTS = (
    "executorch.backends.apple.coreml.compiler",
    EXECUTORCH_COREML_PREPROCESS_MODULE,
    "executorch.backends.apple.coreml.partition",
)


def static_llm_script(backend: type, strategy: type, partitioner: type) -> ModuleType:
    """ExecuTorch's `STATIC_LLM_SCRIPT` module, loaded from its file under a private name, its
    Core ML names bound to `backend` (for ``CoreMLBackend``), `strategy` (for
    ``MULTIMETHOD_WEIGHT_SHARING_STRATEGY``) and `partitioner` (for ``CoreMLPartitioner``).

    The script imports those names from ExecuTorch's Core ML backend, which cannot share a process
    with lowerkit's (``conflict``): stand-in modules holding lowerkit's are in ``sys.modules`` while
    it loads, and only then. Loaded once per process (it defines a torch library at import).
    """
    loaded = sys.modules.get(_STATIC_LLM_SCRIPT_PRIVATE)
    if loaded is not None:
        return loaded
    found = importlib.util.find_spec(STATIC_LLM_SCRIPT)
    if found is None or found.origin is None:
        raise ImportError(f"{STATIC_LLM_SCRIPT} was not found: it needs executorch 1.5.x installed.")
    stand_in = ModuleType("lowerkit stand-in for ExecuTorch's Core ML backend")
    stand_in.CoreMLBackend = backend  # type: ignore[attr-defined]
    stand_in.MULTIMETHOD_WEIGHT_SHARING_STRATEGY = strategy  # type: ignore[attr-defined]
    stand_in.CoreMLPartitioner = partitioner  # type: ignore[attr-defined]
    spec = importlib.util.spec_from_file_location(_STATIC_LLM_SCRIPT_PRIVATE, found.origin)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    with modules_standing_in(dict.fromkeys(STATIC_LLM_SCRIPT_IMPORTS, stand_in)):
        spec.loader.exec_module(module)
    sys.modules[_STATIC_LLM_SCRIPT_PRIVATE] = module
    return module
