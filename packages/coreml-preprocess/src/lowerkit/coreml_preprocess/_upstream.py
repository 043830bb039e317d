"""Every reach into ExecuTorch's and coremltools' private names, in one place.

A version bump of either library is one file to read: this one (and the upstream functions
whose source hashes ``tests/coreml_preprocess_tests/test_upstream_sources.py`` holds).
Proven on the versions in ``lowerkit.coreml_preprocess.versions.PROVEN_ON``.
"""

from __future__ import annotations

import functools
import gc
import importlib
import importlib.util
import logging
import os
import sys
from pathlib import Path
from types import ModuleType
from typing import Any

import coremltools as ct
import executorch.exir.backend.backend_details as _backend_details
from coremltools.converters.mil.mil.passes.pass_registry import PASS_REGISTRY
from torch._ops import OpOverload as OpOverload

from lowerkit.pass_infra.accelerations.patching import Patch, Replacement

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


def apply_pipeline_validating_at_ends(prog: Any, pass_pipeline: Any) -> None:
    """coremltools' ``PassPipelineManager.apply_pipeline``, validating before and after, not per pass.

    coremltools re-validates the whole program after every one of ~110 passes, which is about
    half of ``ct.convert``'s time on a CNN; the passes and their order are the same, so the result
    is too. A program a pass broke is still caught, at the end of the pipeline. As upstream,
    every function is also checked for missing essential scope information after each
    ``common::dead_code_elimination`` (the one check that only runs there:
    `check_essential_scope`), without the rest of the validation (15 of the 21 whole-program
    validations of a default conversion were these).
    """
    from coremltools.converters.mil.mil.passes.pass_registry import PASS_REGISTRY as registry

    if pass_pipeline is None:
        raise ValueError("The pass_pipeline cannot be None.")
    pass_pipeline.validate()
    prog.validate()
    for pass_name in pass_pipeline.passes:
        graph_pass = registry[pass_name]
        graph_pass.set_options(pass_pipeline.get_options(pass_name))
        graph_pass(prog)
        if pass_name == "common::dead_code_elimination":
            check_essential_scope(prog)
    prog.validate()


def check_essential_scope(prog: Any) -> None:
    """What ``prog.validate(check_essential_scope=True)`` adds to a validation: every function's
    ``_check_has_scope_info`` (no op without its essential scope sources), in the same order."""
    for function in prog.functions.values():
        function._check_has_scope_info()


def _converters_entry() -> Any:
    from coremltools.converters import _converters_entry as entry

    return entry


def _pass_pipeline_manager() -> Any:
    from coremltools.converters.mil.mil.passes.pass_pipeline import PassPipelineManager

    return PassPipelineManager


class _GcDuringConversion:
    """Stands in for the ``gc`` module in coremltools' ``_converters_entry`` (its one use:
    ``gc.collect()`` at the end of ``ct.convert``): skipped for a thread inside
    `FASTER_CONVERSION`, the real collection for any other thread."""

    def __getattr__(self, name: str) -> Any:
        return getattr(gc, name)

    @staticmethod
    def collect(*args: Any) -> int:
        if FASTER_CONVERSION.active():
            return 0
        return gc.collect(*args)


def _mil_block_classes() -> tuple[Any, Any]:
    from coremltools.converters.mil.mil.block import Block, Function

    return Block, Function


def nothing_to_propagate(block: Any) -> bool:
    """Whether coremltools' ``Block._propagate_nonreplaceable_vars`` would leave `block` as it is.

    That walk (run at the exit of every ``with block:``, once or more per MIL pass) resets each op
    output's ``nonreplaceable_vars_upstream`` and sets it again: ``{var}`` for a ``constexpr_*``
    op's output, the empty set for ``shape``'s, else the union of the op inputs' sets. In a
    function (no enclosing block) whose ops are no ``constexpr_*`` op and hold no nested block,
    whose inputs and op outputs all hold the empty set, every op input is a function input or an
    earlier op's output (a valid program), so every set it computes is empty again: the walk
    changes nothing. Anything else (a compressed weight, control flow, a set not empty): False.
    """
    _, function_class = _mil_block_classes()
    if not isinstance(block, function_class):
        return False
    for var in block.inputs.values():
        if getattr(var, "_nonreplaceable_vars_upstream", None) != set():
            return False
    for op in block.operations:
        if op.blocks or type(op).__name__.startswith("constexpr_"):
            return False
        outputs = op.outputs
        if outputs is None:
            continue
        for out in outputs:
            if out._nonreplaceable_vars_upstream:
                return False
    return True


def _propagate_unless_unchanged(original: Any) -> Any:
    """``Block._propagate_nonreplaceable_vars`` that returns at once when `nothing_to_propagate`."""

    def propagate_nonreplaceable_vars(self: Any) -> None:
        if nothing_to_propagate(self):
            return
        original(self)

    return propagate_nonreplaceable_vars


def _fp16_compute_precision_class() -> Any:
    from coremltools.converters.mil.mil.passes.defs.quantization import FP16ComputePrecision

    return FP16ComputePrecision


#: coremltools' fp16 range bound.
_FP16_MAX = 65504


def fp16_overflow_bounded_first(stock: Any) -> Any:
    """coremltools' ``FP16ComputePrecision.fp16_overflow`` (`stock`), deciding most ops from bounds.

    Upstream, for each fp32 ``const`` input, takes ``|value|``, selects the elements below
    ``1e38`` (``np.where`` index arrays and a copy: the whole weight, several times over) and
    asks whether their maximum exceeds 65504. When every such constant's minimum and maximum
    lie in ``[-65504, 65504]`` (no NaN: a NaN makes them NaN and the comparison false), no
    element exceeds 65504 in magnitude, so upstream's answer is "no" without that work. An op
    with any other fp32 constant (an infinity, a NaN, a large value, not a non-empty float
    array) is answered by `stock` itself.
    """
    import numpy as np

    def within_fp16(value: Any) -> bool:
        return bool(
            isinstance(value, np.ndarray)
            and value.dtype.kind == "f"
            and value.size > 0
            and -_FP16_MAX <= value.min()
            and value.max() <= _FP16_MAX
        )

    def fp16_overflow(op: Any) -> bool:
        for inputs in op.inputs.values():
            for var in inputs if isinstance(inputs, (list, tuple)) else [inputs]:
                producer = var.op
                if (
                    producer is not None
                    and producer.op_type == "const"
                    and var.is_tensor_or_scalar_of(dtype="fp32")
                    and not within_fp16(producer.val.val)
                ):
                    return bool(stock(op))
        return False

    fp16_overflow.__doc__ = fp16_overflow_bounded_first.__doc__
    return fp16_overflow


#: coremltools' "an array this small is checked element by element" bound.
_UNDERFLOW_CHECK_SIZE = 400


def _zero_bounds(pass_class: Any, np_type: Any) -> tuple[Any, Any]:
    """(smallest positive, largest negative) `np_type` value, set up as ``_close_to_zero`` does."""
    import numpy as np

    if np_type not in pass_class.type_eps:
        pass_class.type_eps[np_type] = np.finfo(np_type).eps
        pass_class.type_min[np_type] = np.nextafter(0.0, 1.0, dtype=np_type)
        pass_class.type_negmin[np_type] = np.nextafter(0.0, -1.0, dtype=np_type)
    return pass_class.type_min[np_type], pass_class.type_negmin[np_type]


def _underflow_check_at_once(stock: Any) -> Any:
    """coremltools' ``FP16ComputePrecision._check_underflow_to_zero`` (`stock`), on whole arrays.

    Upstream (for a constant of fewer than 400 elements cast to fp16) calls ``np.isclose`` on the
    fp16 value, then twice per element: each element that is not close to zero in fp32 but is
    in fp16 becomes the smallest fp16 subnormal of its sign. ``np.isclose(x, 0, atol=m,
    rtol=eps)`` with `x` an array or scalar of the same float type as `m` and `eps` is
    ``|x - 0.0| <= m + eps * |0.0|`` (or ``x == 0.0``) computed in that type, that is
    ``|x| <= m``: the same test, element by element, on whole arrays at a time. An fp32 value
    cast to fp16 is what ``add_fp16_cast`` gives it; anything else goes to `stock`.
    """
    import numpy as np

    def check_underflow_to_zero(self: Any, new_var: Any, var: Any) -> None:
        new_value = new_var.val
        if new_value is None:
            return
        value = var.val
        if not (
            isinstance(value, (np.ndarray, np.float32))
            and isinstance(new_value, (np.ndarray, np.float16))
            and value.dtype == np.float32
            and new_value.dtype == np.float16
        ):
            stock(self, new_var, var)
            return
        if value.size >= _UNDERFLOW_CHECK_SIZE:
            return
        smallest16, negative16 = _zero_bounds(type(self), np.float16)
        smallest32, _ = _zero_bounds(type(self), np.float32)
        if not (np.abs(new_value) <= smallest16).any():
            return
        original = value.flatten()
        flat = new_value.flatten()
        underflows = (np.abs(flat) <= smallest16) & ~(np.abs(original) <= smallest32)
        if not underflows.any():
            return
        flat[underflows] = np.where(np.sign(original[underflows]) > 0, smallest16, negative16)
        if np.isscalar(new_value):
            new_var._sym_val.val = flat[0]
        else:
            new_var._sym_val.val = flat.reshape(new_value.shape)

    check_underflow_to_zero.__doc__ = _underflow_check_at_once.__doc__
    return check_underflow_to_zero


#: coremltools' MIL type predicates (``types.is_tensor`` ...): ``get_type_info(t).name`` compared
#: with a constant, where ``get_type_info`` of a tensor type builds a fresh ``Type`` holding its
#: shape and element type on every call. (module, name) of every binding of each, by predicate.
_TYPE_PREDICATES: dict[tuple[str, str], tuple[str, ...]] = {
    ("coremltools.converters.mil.mil.types.type_mapping", "is_tensor"): (
        "coremltools.converters.mil.mil.types.type_mapping",
        "coremltools.converters.mil.mil.types.type_tensor",
        "coremltools.converters.mil.mil.types",
    ),
    ("coremltools.converters.mil.mil.types.type_mapping", "is_str"): (
        "coremltools.converters.mil.mil.types.type_mapping",
        "coremltools.converters.mil.mil.types",
    ),
    ("coremltools.converters.mil.mil.types.type_mapping", "is_tuple"): (
        "coremltools.converters.mil.mil.types.type_mapping",
        "coremltools.converters.mil.mil.types",
    ),
    ("coremltools.converters.mil.mil.types.type_mapping", "is_dict"): (
        "coremltools.converters.mil.mil.types.type_mapping",
        "coremltools.converters.mil.mil.types",
    ),
    ("coremltools.converters.mil.mil.types.type_list", "is_list"): (
        "coremltools.converters.mil.mil.types.type_list",
        "coremltools.converters.mil.mil.types.type_mapping",
        "coremltools.converters.mil.mil.types",
    ),
    ("coremltools.converters.mil.mil.types.type_state", "is_state"): (
        "coremltools.converters.mil.mil.types.type_state",
        "coremltools.converters.mil.mil.types",
    ),
}

#: ``{(predicate, class): result}`` while `FASTER_CONVERSION` is installed; emptied at its removal.
_PREDICATE_RESULTS: dict[tuple[Any, type], bool] = {}


def memoized_on_classes(predicate: Any) -> Any:
    """`predicate` (a MIL type predicate), its result kept per plain class it was asked about.

    The MIL types coremltools asks about are plain classes (``type(t) is type``: one per tensor
    shape and element type, per scalar type, ...) whose ``__type_info__`` name depends on the
    class alone, so the predicate's answer for a class never changes: it is computed by the
    predicate itself the first time and looked up afterwards. Anything else (``None``, an
    instance, a class with a metaclass) and any call that raises go to the predicate every
    time. The same answers in every thread, so the replacement needs no per-thread dispatch.
    """
    results = _PREDICATE_RESULTS

    def memoized(t: Any) -> bool:
        if type(t) is not type:
            return bool(predicate(t))
        key = (predicate, t)
        found = results.get(key)
        if found is None:
            found = results[key] = bool(predicate(t))
        return found

    memoized.__name__ = getattr(predicate, "__name__", "memoized")
    memoized.__doc__ = getattr(predicate, "__doc__", None)
    memoized.__wrapped__ = predicate  # type: ignore[attr-defined]
    return memoized


def _type_predicate_replacements() -> list[Replacement]:
    replacements = []
    for (defining, name), bindings in _TYPE_PREDICATES.items():
        predicate = getattr(importlib.import_module(defining), name)
        memoized = memoized_on_classes(predicate)
        for module in bindings:
            owner = importlib.import_module(module)
            if getattr(owner, name) is not predicate:
                raise RuntimeError(f"{module}.{name} is not {defining}.{name}: re-read _TYPE_PREDICATES")
            replacements.append(Replacement(owner, name, memoized, dispatch=False))
    return replacements


def _forget_predicate_results() -> None:
    _PREDICATE_RESULTS.clear()


def _debug_message_sites() -> dict[Any, Any]:
    """{code object: module logger} of the coremltools functions whose only ``str(function)`` is
    the argument of a ``logger.debug(...)`` call (formatted eagerly, whatever the log level)."""
    from coremltools.converters.mil.mil.passes.defs import (
        optimize_normalization,
        optimize_repeat_ops,
    )

    return {
        optimize_repeat_ops._TransposeOptimization.apply_transform.__code__: optimize_repeat_ops.logger,
        optimize_normalization.fuse_layernorm_or_instancenorm.apply.__code__: optimize_normalization.logger,
    }


def _function_str_unless_dropped(original: Any, sites: dict[Any, Any]) -> Any:
    """``Function.__str__`` that gives ``""`` to a `sites` function whose logger drops DEBUG."""

    def function_str(self: Any) -> str:
        logger = sites.get(sys._getframe(1).f_code)
        if logger is not None and not logger.isEnabledFor(logging.DEBUG):
            return ""
        return str(original(self))

    function_str.__name__ = "__str__"
    function_str.__doc__ = (
        "coremltools' ``Function.__str__``; an empty string when the caller is a pass that only "
        "formats it into a DEBUG message its logger drops (so the same for every thread)."
    )
    return function_str


def _faster_conversion_replacements() -> list[Replacement]:
    block_class, _ = _mil_block_classes()
    return [
        *_type_predicate_replacements(),
        Replacement(
            _pass_pipeline_manager(),
            "apply_pipeline",
            staticmethod(apply_pipeline_validating_at_ends),
        ),
        Replacement(_converters_entry(), "gc", _GcDuringConversion(), dispatch=False),
        Replacement(
            block_class,
            "_propagate_nonreplaceable_vars",
            _propagate_unless_unchanged(block_class.__dict__["_propagate_nonreplaceable_vars"]),
        ),
        Replacement(
            _mil_block_classes()[1],
            "__str__",
            _function_str_unless_dropped(_mil_block_classes()[1].__dict__["__str__"], _debug_message_sites()),
            dispatch=False,
        ),
        Replacement(
            _fp16_compute_precision_class(),
            "_check_underflow_to_zero",
            _underflow_check_at_once(_fp16_compute_precision_class().__dict__["_check_underflow_to_zero"]),
        ),
        Replacement(
            _fp16_compute_precision_class(),
            "fp16_overflow",
            staticmethod(
                fp16_overflow_bounded_first(_fp16_compute_precision_class().__dict__["fp16_overflow"].__func__)
            ),
        ),
    ]


#: ``ct.convert`` minus costs that change nothing (see `faster_conversion`).
FASTER_CONVERSION = Patch(
    "lowerkit.coreml_preprocess.faster_conversion",
    _faster_conversion_replacements,
    on_uninstall=[_forget_predicate_results],
)


def faster_conversion() -> Any:
    """Within the block, ``ct.convert`` (in this thread) does the same work minus these costs.

    * A MIL program is validated once before and once after each pass pipeline, not after every
      pass (``apply_pipeline_validating_at_ends``; after each dead-code elimination only the
      essential-scope check upstream adds there): about half of the conversion of a CNN.
    * ``ct.convert`` ends with a full ``gc.collect()``; in a process holding torch's and
      ExecuTorch's object graphs that alone takes up to a second. Python's collector still runs
      on its own thresholds.
    * At the exit of every ``with block:`` (each MIL pass opens one or more), coremltools
      recomputes every var's set of upstream ``constexpr_*`` vars over the whole program; when
      that would give back the same (empty) sets (`nothing_to_propagate`: no compressed weight,
      as in fp16 / fp32 / int8-static conversions until weights are compressed), the walk is
      skipped.
    * ``add_fp16_cast``: the overflow test decides a constant within ±65504 from its bounds
      (`fp16_overflow_bounded_first`), and the underflow fix-up runs on whole arrays
      (`_underflow_check_at_once`), not per element through ``np.isclose``.
    * The MIL type predicates keep their answer per type class (`memoized_on_classes`), and a
      whole function is not formatted into a DEBUG message the logger drops
      (`_function_str_unless_dropped`); these two are installed for every thread while the
      patch is held, as they give every caller coremltools' own answers.
    Other threads convert the stock way meanwhile; scopes nest (reference-counted).
    """
    return FASTER_CONVERSION.scope()


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
