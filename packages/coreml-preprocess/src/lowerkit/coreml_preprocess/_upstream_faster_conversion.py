"""FASTER_CONVERSION: ``ct.convert`` minus costs that change nothing (see `faster_conversion`).

Every private coremltools name this acceleration reaches is here (beside it, as in `_upstream`);
the upstream functions it replaces are hashed in
``tests/coreml_preprocess_tests/test_upstream_sources.py``.
"""

from __future__ import annotations

import gc
import importlib
import logging
import sys
import warnings
from typing import Any

from lowerkit.pass_infra.accelerations.patching import Patch, Replacement

__all__ = [
    "FASTER_CONVERSION",
    "apply_pipeline_validating_at_ends",
    "check_essential_scope",
    "faster_conversion",
    "fp16_overflow_bounded_first",
    "memoized_on_classes",
    "nothing_to_propagate",
    "symmetric_quantization_in_torch",
]


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
    ``gc.collect()`` at the end of ``ct.convert``).

    For a thread inside `FASTER_CONVERSION` the collection is skipped only while nothing is
    frozen: it would walk every object of the process. With a frozen heap (pass-infra's
    ``SETTLED_HEAP``, held by lowerkit's lowering scopes) it walks only what was made since, and
    it frees the conversion's garbage (the MIL program's reference cycles, which hold its
    weight arrays) as upstream does, so that memory is released when stock releases it. Any other
    thread: the real collection.
    """

    def __getattr__(self, name: str) -> Any:
        return getattr(gc, name)

    @staticmethod
    def collect(*args: Any) -> int:
        if FASTER_CONVERSION.active() and gc.get_freeze_count() == 0:
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


def _quantization_utils() -> Any:
    import coremltools.optimize._utils as utils

    return utils


def symmetric_quantization_in_torch(stock: Any) -> Any:
    """coremltools' ``quantize_weight_by_dtype`` (`stock`) for signed linear-symmetric integers,
    its element-wise work in torch.

    Upstream divides each weight by its channel's (block's) scale, rounds and clips in numpy;
    for fp16 weights (every weight after an fp16 conversion) numpy runs that one element at a
    time, ~1 s of ``linear_quantize_weights`` on an 8-layer LLM. torch's fp16 and fp32 division,
    round-half-to-even and clamp give every element the same value: both compute an fp16 quotient
    in fp32 and round it once, which is the correctly rounded quotient (fp32 has 24 >= 2 * 11 + 2
    bits), and both round fp32 quotients correctly. The reductions (exact) run in torch, the
    scale in numpy as upstream. A weight that is not fp16 / fp32, holds a NaN or an infinity, or
    has a zero scale (or one of another dtype), and every other mode or type, goes to `stock`.
    """
    import numpy as np
    import torch

    utils = _quantization_utils()
    types = utils.types

    def quantize_weight_by_dtype(weight: Any, axes: Any, dtype: Any, quantization_mode: str) -> Any:
        if not (
            quantization_mode == "LINEAR_SYMMETRIC"
            and types.is_int(dtype)
            and not dtype.is_unsigned()
            and isinstance(weight, np.ndarray)
            and weight.dtype in (np.float16, np.float32)
            and weight.size > 0
        ):
            return stock(weight, axes, dtype, quantization_mode)
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore", UserWarning)  # a read-only weight: never written
                tensor = torch.from_numpy(weight)
        except (TypeError, ValueError):  # a byte order or layout torch does not take
            return stock(weight, axes, dtype, quantization_mode)
        if not bool(torch.isfinite(tensor).all()):
            return stock(weight, axes, dtype, quantization_mode)
        val_min = torch.amin(tensor, dim=axes, keepdim=True).numpy()
        val_max = torch.amax(tensor, dim=axes, keepdim=True).numpy()
        q_val_min, q_val_max = utils.get_quant_range_by_dtype(dtype, quantization_mode)
        max_abs = np.maximum(np.abs(val_min), np.abs(val_max))
        val_min = -max_abs
        val_max = max_abs
        scale = (val_max - val_min) / (q_val_max - q_val_min)
        if scale.dtype != weight.dtype or not scale.all():
            return stock(weight, axes, dtype, quantization_mode)
        quantized = torch.round(tensor / torch.from_numpy(scale)).clamp_(q_val_min, q_val_max)
        return quantized.numpy(), scale.astype(weight.dtype).squeeze(), None

    quantize_weight_by_dtype.__doc__ = symmetric_quantization_in_torch.__doc__
    return quantize_weight_by_dtype


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
        Replacement(
            _quantization_utils(),
            "quantize_weight_by_dtype",
            symmetric_quantization_in_torch(_quantization_utils().quantize_weight_by_dtype),
        ),
    ]


#: ``ct.convert`` minus costs that change nothing (see `faster_conversion`).
FASTER_CONVERSION = Patch(
    "lowerkit.coreml_preprocess._upstream_faster_conversion",
    _faster_conversion_replacements,
    on_uninstall=[_forget_predicate_results],
)


def faster_conversion() -> Any:
    """Within the block, ``ct.convert`` (in this thread) does the same work minus these costs.

    * A MIL program is validated once before and once after each pass pipeline, not after every
      pass (``apply_pipeline_validating_at_ends``; after each dead-code elimination only the
      essential-scope check upstream adds there): about half of the conversion of a CNN.
    * ``ct.convert`` ends with a full ``gc.collect()``; in a process holding torch's and
      ExecuTorch's object graphs that alone takes up to a second. It is skipped unless the heap
      is frozen (``SETTLED_HEAP``), where it walks only what was made since and frees the
      conversion's garbage, as upstream (`_GcDuringConversion`).
    * At the exit of every ``with block:`` (each MIL pass opens one or more), coremltools
      recomputes every var's set of upstream ``constexpr_*`` vars over the whole program; when
      that would give back the same (empty) sets (`nothing_to_propagate`: no compressed weight,
      as in fp16 / fp32 / int8-static conversions until weights are compressed), the walk is
      skipped.
    * ``add_fp16_cast``: the overflow test decides a constant within ±65504 from its bounds
      (`fp16_overflow_bounded_first`), and the underflow fix-up runs on whole arrays
      (`_underflow_check_at_once`), not per element through ``np.isclose``.
    * Linear weight quantization (``linear_quantize_weights``, ExecuTorch's
      ``op_linear_quantizer_config``) divides, rounds and clips signed symmetric weights in torch
      (`symmetric_quantization_in_torch`), not element by element in numpy's fp16.
    * The MIL type predicates keep their answer per type class (`memoized_on_classes`), and a
      whole function is not formatted into a DEBUG message the logger drops
      (`_function_str_unless_dropped`); these two are installed for every thread while the
      patch is held, as they give every caller coremltools' own answers.
    Other threads convert the stock way meanwhile; scopes nest (reference-counted).
    """
    return FASTER_CONVERSION.scope()
