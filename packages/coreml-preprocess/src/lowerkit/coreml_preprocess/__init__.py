"""lowerkit's Core ML backend ahead of time: typed options, partitioner, deterministic preprocess.

    from lowerkit.coreml_preprocess import CoreMLCompileOptions, CoreMLPartitioner
    options = CoreMLCompileOptions(minimum_deployment_target="iOS18")
    lowered = to_edge_transform_and_lower(ep, partitioner=[CoreMLPartitioner(compile_specs=options)])

or, with a recipe ("fp16", "fp32", "int8", "w8", "w4", "palettize4"), in one call:

    from lowerkit.coreml_preprocess import lower_to_coreml
    lowering = lower_to_coreml(model, example_inputs, "w4")   # .pte, .mlmodel, .decoded_weights

Loading this package's backend and ExecuTorch's own Core ML backend in one process fails with
``CoreMLBackendConflictError`` (both have backend id ``CoreMLBackend``).
"""

from lowerkit.coreml_preprocess.backend import CoreMLBackend
from lowerkit.coreml_preprocess.compression import (
    WEIGHT_THRESHOLD,
    CompressionRule,
    WeightCompression,
    WeightDecision,
)
from lowerkit.coreml_preprocess.convert import convert_to_mlmodel
from lowerkit.coreml_preprocess.embeddings import EmbeddingTables, find_embedding_tables
from lowerkit.coreml_preprocess.errors import (
    CoreMLBackendConflictError,
    CoreMLLoweringError,
    CoreMLOptionsError,
    PassPipelineError,
)
from lowerkit.coreml_preprocess.lowering import (
    CoreMLLowering,
    CoreMLPartitionReport,
    Progress,
    lower_to_coreml,
)
from lowerkit.coreml_preprocess.numerics import debug_coreml, debug_coreml_weights
from lowerkit.coreml_preprocess.options import (
    CoreMLCompileOptions,
    ModelType,
    MultimethodWeightSharing,
    SpecKey,
)
from lowerkit.coreml_preprocess.partitioner import CoreMLPartitioner
from lowerkit.coreml_preprocess.pass_pipeline import (
    PIPELINE_METADATA_KEY,
    MilPassPipeline,
    resolve_pass_pipeline,
    validate_pass_names,
)
from lowerkit.coreml_preprocess.payload import files_of, flatten_tree, unflatten_payload
from lowerkit.coreml_preprocess.recipes import (
    RECIPES,
    CoreMLRecipe,
    compile_options_for,
    get_recipe,
)
from lowerkit.coreml_preprocess.scope import coreml_scope
from lowerkit.coreml_preprocess.versions import PROVEN_ON
from lowerkit.coreml_preprocess.weights import constexpr_op_counts, decoded_weights
from lowerkit.pass_infra.suggest import did_you_mean

__all__ = [
    "PIPELINE_METADATA_KEY",
    "PROVEN_ON",
    "RECIPES",
    "WEIGHT_THRESHOLD",
    "CompressionRule",
    "CoreMLBackend",
    "CoreMLBackendConflictError",
    "CoreMLCompileOptions",
    "CoreMLLowering",
    "CoreMLLoweringError",
    "CoreMLOptionsError",
    "CoreMLPartitionReport",
    "CoreMLPartitioner",
    "CoreMLRecipe",
    "EmbeddingTables",
    "MilPassPipeline",
    "ModelType",
    "MultimethodWeightSharing",
    "PassPipelineError",
    "Progress",
    "SpecKey",
    "WeightCompression",
    "WeightDecision",
    "compile_options_for",
    "constexpr_op_counts",
    "convert_to_mlmodel",
    "coreml_scope",
    "debug_coreml",
    "debug_coreml_weights",
    "decoded_weights",
    "did_you_mean",
    "files_of",
    "find_embedding_tables",
    "flatten_tree",
    "get_recipe",
    "lower_to_coreml",
    "resolve_pass_pipeline",
    "unflatten_payload",
    "validate_pass_names",
]
