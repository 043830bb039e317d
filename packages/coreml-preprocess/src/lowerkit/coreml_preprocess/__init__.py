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
from lowerkit.coreml_preprocess.llm_export import accelerated_coreml_llm_export
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
from lowerkit.pass_infra.helpers.suggest import did_you_mean

__all__ = [
    "PIPELINE_METADATA_KEY",  # the model metadata key that records the MIL pass pipeline
    "PROVEN_ON",  # the torch / ExecuTorch / coremltools versions coreml-preprocess was proven on
    "RECIPES",  # the Core ML recipes by name
    "WEIGHT_THRESHOLD",  # coremltools compresses only weights with more elements than this
    "CompressionRule",  # layers by module path and/or op type, and their compression setting
    "CoreMLBackend",  # Core ML BackendDetails (id CoreMLBackend) with deterministic payloads
    "CoreMLBackendConflictError",  # lowerkit's and ExecuTorch's Core ML backends loaded in one process
    "CoreMLCompileOptions",  # typed Core ML compile options that round-trip to CompileSpecs
    "CoreMLLowering",  # lower_to_coreml's result: .pte, the Core ML models, reports
    "CoreMLLoweringError",  # an edge program that cannot be lowered with these options
    "CoreMLOptionsError",  # invalid Core ML compile options or compile specs
    "CoreMLPartitionReport",  # one Core ML delegate: payload size, spec version, compressed ops
    "CoreMLPartitioner",  # tags what Core ML supports for lowerkit's CoreMLBackend
    "CoreMLRecipe",  # a named way to lower to Core ML
    "EmbeddingTables",  # a MIL program's gathers, by what weight quantization should do with them
    "MilPassPipeline",  # a validated MIL pass pipeline: a preset or registered pass names
    "ModelType",  # what the payload holds: .mlpackage or compiled .mlmodelc
    "MultimethodWeightSharing",  # how several methods' partitions combine
    "PassPipelineError",  # a MIL pass pipeline naming a pass coremltools does not have
    "Progress",  # a step timer: progress(name) wraps one lowering step (e.g. a CLI spinner)
    "SpecKey",  # the compile-spec keys: ExecuTorch's plus lowerkit's
    "WeightCompression",  # compression of the converted program's weights: global, rules, threshold
    "WeightDecision",  # what compression did with one weight, and which rule chose
    "accelerated_coreml_llm_export",  # ExecuTorch's LLM export (export_llama) through lowerkit's Core ML backend
    "compile_options_for",  # the CoreMLCompileOptions of a recipe
    "constexpr_op_counts",  # how many constexpr (compressed weight) ops of each type a model has
    "convert_to_mlmodel",  # an edge ExportedProgram converted to a Core ML MLModel
    "coreml_scope",  # scope: the lowering lock, lowerkit's translations and the import guard
    "debug_coreml",  # every quantized layer of a Core ML int8 lowering compared with float
    "debug_coreml_weights",  # each compressed weight of a weight-only recipe, decoded and compared
    "decoded_weights",  # dense numpy weights of every compressed weight op of a model
    "did_you_mean",  # the shared "Did you mean ...?" hint (from pass-infra, for option errors)
    "files_of",  # every file of a tree as {path: bytes}, sorted
    "find_embedding_tables",  # classify a MIL program's gathers by the constant table they read
    "flatten_tree",  # a {name: bytes | subtree} tree flattened into a payload
    "get_recipe",  # the recipe by name, or CoreMLOptionsError with did-you-mean
    "lower_to_coreml",  # lower a model to Core ML with a recipe
    "resolve_pass_pipeline",  # a preset name or pass names as a validated MilPassPipeline
    "unflatten_payload",  # a payload's root name and {name: bytes | subtree} tree
    "validate_pass_names",  # check pass names against coremltools' registry, with did-you-mean
]
