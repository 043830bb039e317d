"""A pt2e quantizer for Core ML that annotates exactly as ExecuTorch's, without re-tracing patterns."""

from lowerkit.coreml_quantizer.annotation_config import AnnotationConfig
from lowerkit.coreml_quantizer.annotators import all_pattern_keys
from lowerkit.coreml_quantizer.config_validation import validate_config
from lowerkit.coreml_quantizer.errors import CoreMLQuantizerError, IgnoredConfigFieldWarning
from lowerkit.coreml_quantizer.exported import require_exported
from lowerkit.coreml_quantizer.int8_config import static_int8_config
from lowerkit.coreml_quantizer.pattern_cache import PatternCache, PatternCacheStats, pattern_cache
from lowerkit.coreml_quantizer.patterns import PatternKey
from lowerkit.coreml_quantizer.prepare import prepare_pt2e, prepare_qat_pt2e
from lowerkit.coreml_quantizer.quantizer import CoreMLQuantizer

__all__ = [
    "AnnotationConfig",  # quantization specs for an op's input, output and weight
    "CoreMLQuantizer",  # the pt2e quantizer that annotates exactly as ExecuTorch's CoreMLQuantizer
    "CoreMLQuantizerError",  # a config or model the Core ML quantizer cannot handle
    "IgnoredConfigFieldWarning",  # a config field pt2e quantization ignores
    "PatternCache",  # traced patterns by key: each traced once per process, copies handed out
    "PatternCacheStats",  # a PatternCache's counters: traces, cache hits, seconds
    "PatternKey",  # a pattern's identity: its getter and real arguments
    "all_pattern_keys",  # every pattern the annotators try, in ExecuTorch's order
    "pattern_cache",  # the process-wide PatternCache
    "prepare_pt2e",  # torchao's prepare_pt2e after checking the model
    "prepare_qat_pt2e",  # torchao's prepare_qat_pt2e after checking the model
    "require_exported",  # a model checked to be an exported GraphModule, or CoreMLQuantizerError
    "static_int8_config",  # the static int8 config of ExecuTorch's Core ML flows (symmetric, per-channel)
    "validate_config",  # a config the Core ML quantizer supports, or CoreMLQuantizerError
]
