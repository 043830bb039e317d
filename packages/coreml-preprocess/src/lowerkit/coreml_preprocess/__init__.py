"""lowerkit's Core ML backend ahead of time: typed options, partitioner, deterministic preprocess.

    from lowerkit.coreml_preprocess import CoreMLCompileOptions, CoreMLPartitioner
    options = CoreMLCompileOptions(minimum_deployment_target="iOS18")
    lowered = to_edge_transform_and_lower(ep, partitioner=[CoreMLPartitioner(compile_specs=options)])

Loading this package's backend and ExecuTorch's own Core ML backend in one process fails with
``CoreMLBackendConflictError`` (both have backend id ``CoreMLBackend``).
"""

from lowerkit.coreml_preprocess.backend import CoreMLBackend
from lowerkit.coreml_preprocess.convert import convert_to_mlmodel
from lowerkit.coreml_preprocess.embeddings import EmbeddingTables, find_embedding_tables
from lowerkit.coreml_preprocess.errors import (
    CoreMLBackendConflictError,
    CoreMLLoweringError,
    CoreMLOptionsError,
    PassPipelineError,
)
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
from lowerkit.coreml_preprocess.scope import coreml_scope
from lowerkit.coreml_preprocess.versions import PROVEN_ON

__all__ = [
    "PIPELINE_METADATA_KEY",
    "PROVEN_ON",
    "CoreMLBackend",
    "CoreMLBackendConflictError",
    "CoreMLCompileOptions",
    "CoreMLLoweringError",
    "CoreMLOptionsError",
    "CoreMLPartitioner",
    "EmbeddingTables",
    "MilPassPipeline",
    "ModelType",
    "MultimethodWeightSharing",
    "PassPipelineError",
    "SpecKey",
    "convert_to_mlmodel",
    "coreml_scope",
    "files_of",
    "find_embedding_tables",
    "flatten_tree",
    "resolve_pass_pipeline",
    "unflatten_payload",
    "validate_pass_names",
]
