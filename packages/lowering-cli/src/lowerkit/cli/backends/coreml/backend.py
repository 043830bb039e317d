"""The Core ML backend: a thin call to lowerkit.coreml_preprocess.lower_to_coreml per target.

The recipes (quantization, palettization, deployment targets) live in coreml-preprocess; this
package maps `-t` targets to them (`targets`), declares and checks the Core ML options
(`options`) and turns the library's errors into the CLI's.
"""

from __future__ import annotations

from collections.abc import Sequence
from contextlib import AbstractContextManager
from pathlib import Path
from typing import TYPE_CHECKING, Any

from lowerkit.cli.backend import Backend, DebugRequest, Given
from lowerkit.cli.backends.coreml import inspection
from lowerkit.cli.backends.coreml.options import OPTIONS, CoreMLSettings, load_recipe, pipeline
from lowerkit.cli.backends.coreml.targets import (
    BY_NAME,
    COREML_CANNOT_RUN,
    COREML_RECIPES,
    FAMILY,
    TARGET_TABLE,
    llm_overrides,
    prefill_decode_flags,
)
from lowerkit.cli.errors import LoweringError, UsageError
from lowerkit.cli.options import LowerOptions, Target
from lowerkit.cli.progress import Steps
from lowerkit.cli.result import Lowered

if TYPE_CHECKING:
    from lowerkit.cli.sources.model import Inputs, ModelSource



class CoreMLBackend(Backend):
    """Core ML delegate programs through lowerkit.coreml_preprocess."""

    family = FAMILY
    title = "Core ML"
    preload = (
        "lowerkit.coreml_quantizer", "lowerkit.coreml_preprocess", "lowerkit.coreml_compiler_ops",
        "lowerkit.cli.backends.coreml.payload", "lowerkit.cli.backends.coreml.verify",
    )
    toolchain = ("coremltools",)
    libraries = ("coremltools",)
    lowerkit_packages = (
        ("lowerkit-coreml-quantizer", "coreml_quantizer"),
        ("lowerkit-coreml-compiler-ops", "coreml_compiler_ops"),
        ("lowerkit-coreml-preprocess", "coreml_preprocess"),
    )
    verification_figures = (("output_sqnr_db", "output SQNR"), ("weight_sqnr_db", "weight SQNR"))
    verify_caveat = COREML_CANNOT_RUN
    targets = tuple(Target(row.name, FAMILY, row.summary, row.calibrates) for row in TARGET_TABLE)
    options = OPTIONS
    settings_type = CoreMLSettings
    decoders = (inspection.WEIGHTS,)
    demo = (("conv_linear", "coreml"), ("resnet8", "coreml-int8"), ("tiny_lm", "coreml-w4"))

    def llm_overrides(self, target: Target) -> dict[str, Any] | None:
        """See `Backend.llm_overrides` (the target table's row says)."""
        return llm_overrides(target)

    def llm_prefill_decode_flags(self, target: Target) -> list[str] | None:
        """See `Backend.llm_prefill_decode_flags` (the target table's row says)."""
        return prefill_decode_flags(target)

    def export_llm_prefill_decode(self, argv: Sequence[str]) -> None:
        """ExecuTorch's ``export_static_llm_coreml`` with lowerkit's Core ML backend (same payload)."""
        from lowerkit.coreml_preprocess.static_llm_export import export_static_llm

        export_static_llm(argv)

    def llm_export_scope(self, config: Any) -> AbstractContextManager[None] | None:
        """``backend.coreml.enabled``: lowerkit's Core ML backend in ``export_llama`` (same payload)."""
        if not config.backend.coreml.enabled:
            return None
        from lowerkit.coreml_preprocess.llm_export import accelerated_coreml_llm_export

        return accelerated_coreml_llm_export()

    def lower(self, source: ModelSource, options: LowerOptions, *, calibration: list[Inputs], steps: Steps) -> Lowered:
        """Lower with the target's recipe (quantize, partition to Core ML, serialize a .pte)."""
        from lowerkit.coreml_preprocess.errors import CoreMLLoweringError, CoreMLOptionsError
        from lowerkit.coreml_preprocess.lowering import lower_to_coreml

        target = options.target
        settings: CoreMLSettings = self.settings_of(options)
        compression = load_recipe(target, settings.recipe) if settings.recipe is not None else None
        model = source.module if source.module is not None else source.export()
        try:
            lowering = lower_to_coreml(
                model,
                source.example_inputs,
                COREML_RECIPES[target.name],
                calibration=calibration or None,
                pass_pipeline=pipeline(settings.pass_names),
                progress=steps.step,
                weight_compression=compression,
                enumerated_shapes=dict(settings.shapes) if settings.shapes is not None else None,
                keep_float=options.keep_float,
            )
        except CoreMLOptionsError as error:
            raise UsageError(str(error)) from None
        except CoreMLLoweringError as error:
            raise LoweringError(str(error)) from None
        lowered = Lowered(model=source.name, target=target, pte=lowering.pte, seconds=steps.seconds)
        lowered.warnings.extend(lowering.warnings)
        lowered.cpu_ops = list(lowering.cpu_ops)
        lowered.reference = lowering
        return lowered

    def verify(self, lowered: Lowered, source: ModelSource) -> dict[str, Any]:
        """Quantization SQNR in torch and decoded-weight SQNR (Core ML itself cannot run on Linux)."""
        from lowerkit.cli.backends.coreml.verify import verify_coreml

        return verify_coreml(lowered, source)

    def debuggable(self, target: Target) -> bool:
        """The targets that quantize activations or compress weights."""
        return BY_NAME[target.name].debug is not None

    def debug(self, source: ModelSource, target: Target, request: DebugRequest) -> Any:
        """coreml_preprocess' report: int8 activations (threshold in dB, default 20) or compressed weights."""
        from lowerkit.coreml_preprocess.numerics import (
            NoQuantizedLayerError,
            debug_coreml,
            debug_coreml_weights,
        )

        row = BY_NAME[target.name]
        model = source.module if source.module is not None else source.export()
        try:
            if row.debug == "weights":
                return debug_coreml_weights(model, source.example_inputs, row.recipe, model_name=source.name)
            return debug_coreml(
                model, source.example_inputs, calibration=request.calibration or None, keep_float=request.keep_float,
                threshold_db=20.0 if request.threshold is None else request.threshold, scan=request.scan,
                model_name=source.name, target_sqnr_db=request.target_sqnr, search=request.search,
            )
        except NoQuantizedLayerError as error:
            raise UsageError(str(error)) from None

    def pattern(self, target: Target) -> str | None:
        """"coreml-palettize*" for the palettizing targets."""
        return BY_NAME[target.name].pattern

    def write_outputs(self, lowered: Lowered, options: LowerOptions, given: Given) -> list[str]:
        """The Core ML model package (--mlpackage): the program's one Core ML delegate."""
        mlpackage: Path | None = given.get("--mlpackage")
        if mlpackage is not None:
            from lowerkit.cli.backends.coreml.payload import write_mlpackage
            from lowerkit.cli.pte_file import read_plans

            found = [d.payload for plan in read_plans(lowered.pte) for d in plan.delegates if d.backend_id == "CoreMLBackend"]
            if len(found) != 1:
                raise LoweringError(f"--mlpackage needs exactly one Core ML delegate, the program has {len(found)}")
            write_mlpackage(found[0], mlpackage)
        return []


#: The Core ML backend (registered in `targets`).
COREML = CoreMLBackend()
