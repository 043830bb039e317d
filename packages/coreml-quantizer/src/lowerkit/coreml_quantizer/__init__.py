"""A pt2e quantizer for Core ML that annotates exactly as ExecuTorch's, without re-tracing patterns."""

from lowerkit.coreml_quantizer.annotation_config import AnnotationConfig
from lowerkit.coreml_quantizer.annotators import all_pattern_keys
from lowerkit.coreml_quantizer.config_validation import validate_config
from lowerkit.coreml_quantizer.errors import CoreMLQuantizerError, IgnoredConfigFieldWarning
from lowerkit.coreml_quantizer.exported import require_exported
from lowerkit.coreml_quantizer.pattern_cache import PatternCache, PatternCacheStats, pattern_cache
from lowerkit.coreml_quantizer.patterns import PatternKey
from lowerkit.coreml_quantizer.prepare import prepare_pt2e, prepare_qat_pt2e
from lowerkit.coreml_quantizer.quantizer import CoreMLQuantizer

__all__ = [
    "AnnotationConfig",
    "CoreMLQuantizer",
    "CoreMLQuantizerError",
    "IgnoredConfigFieldWarning",
    "PatternCache",
    "PatternCacheStats",
    "PatternKey",
    "all_pattern_keys",
    "pattern_cache",
    "prepare_pt2e",
    "prepare_qat_pt2e",
    "require_exported",
    "validate_config",
]
