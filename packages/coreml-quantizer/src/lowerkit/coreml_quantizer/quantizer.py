"""``CoreMLQuantizer``: ExecuTorch's Core ML pt2e quantizer, without re-tracing patterns."""

from __future__ import annotations

from typing import Any

from coremltools.optimize.torch.quantization import (
    LinearQuantizerConfig,
    ModuleLinearQuantizerConfig,
)
from torch.fx import GraphModule
from torchao.quantization.pt2e.quantizer import Quantizer

from lowerkit.coreml_quantizer.anchors import GraphOps
from lowerkit.coreml_quantizer.annotation_config import AnnotationConfig
from lowerkit.coreml_quantizer.annotators import ANNOTATORS
from lowerkit.coreml_quantizer.config_validation import validate_config
from lowerkit.coreml_quantizer.exported import require_exported
from lowerkit.coreml_quantizer.filters import (
    NodeFilter,
    get_module_name_filter,
    get_not_object_type_or_name_filter,
    get_object_type_filter,
)
from lowerkit.coreml_quantizer.pattern_cache import PatternCache, pattern_cache


class CoreMLQuantizer(Quantizer):
    """A pt2e quantizer for Core ML that annotates exactly as ExecuTorch's ``CoreMLQuantizer``.

    It takes the same coremltools ``LinearQuantizerConfig`` (global, module-type and
    module-name configs) and gives the same annotations; patterns come from the
    process-wide `pattern_cache`, and only those whose ops occur in the model are built.
    """

    def __init__(self, config: LinearQuantizerConfig, *, cache: PatternCache | None = None) -> None:
        super().__init__()
        self._config = validate_config(config)
        self._cache = cache if cache is not None else pattern_cache

    @property
    def config(self) -> LinearQuantizerConfig:
        """The coremltools config this quantizer applies."""
        return self._config

    def _annotate_all_patterns(
        self,
        model: GraphModule,
        quantization_config: ModuleLinearQuantizerConfig | None,
        filter_fn: NodeFilter | None,
    ) -> None:
        # ExecuTorch's first pattern annotator starts with these two calls (and every
        # later one repeats them to no effect): the graph is not changed after this.
        model.graph.eliminate_dead_code()
        model.recompile()
        model_ops = GraphOps(model.graph)
        for annotator in ANNOTATORS:
            # A fresh config per annotator, as ExecuTorch: observer sharing in
            # prepare_pt2e depends on which annotations hold the same spec objects.
            annotation_config = AnnotationConfig.from_quantization_config(quantization_config)
            annotator.run(model, annotation_config, filter_fn, model_ops, self._cache)

    def transform_for_annotation(self, model: GraphModule) -> GraphModule:
        """Check that ``model`` was exported; it is returned unchanged."""
        return require_exported(model)

    def annotate(self, model: GraphModule) -> GraphModule:
        """Annotate ``model`` in place: name configs first, then type configs, then the global one."""
        require_exported(model)
        module_name_list = list(self._config.module_name_configs.keys())
        for module_name, config in self._config.module_name_configs.items():
            self._annotate_all_patterns(model, config, get_module_name_filter(module_name))

        tp_list: list[Any] = list(self._config.module_type_configs.keys())
        for module_type, config in self._config.module_type_configs.items():
            self._annotate_all_patterns(model, config, get_object_type_filter(module_type))

        self._annotate_all_patterns(
            model,
            self._config.global_config,
            get_not_object_type_or_name_filter(tp_list, module_name_list),
        )
        return model

    def validate(self, model: GraphModule) -> None:
        """Nothing to check after annotation (as ExecuTorch's)."""
