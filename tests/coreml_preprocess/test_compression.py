"""Compression of every weighted op (a compile option), checked on the MIL program and decoded weights.

Core ML cannot execute a model on Linux: these tests check the converted MIL program preprocess
packaged and its weights decoded back to numpy by lowerkit's decoders
(``lowerkit.coreml_compiler_ops.decode_constexpr_weights``), never the model's outputs.

* lowerkit's compile-option palettization equals ``ct.optimize.coreml.palettize_weights`` called
  directly on the same converted MLModel (run in this process, compared weight for weight);
* every conv and linear weight above the threshold is compressed, with its SQNR against the
  float (fp16) weight Core ML stores otherwise printed and bounded;
* resnet8 and MobileNetV1 at 4-bit palettization: ``.pte`` <= 40% of fp16;
* each new option gives the same ``.pte`` bytes in another process;
* bad recipes fail with one line naming the rule.
"""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import coremltools.optimize as cto
import numpy as np
import pytest
from threadpoolctl import threadpool_limits

from coreml_preprocess import compression_worker
from lowerkit import zoo
from lowerkit.coreml_compiler_ops import decode_constexpr_weights
from lowerkit.coreml_preprocess import CoreMLLowering, CoreMLOptionsError, lower_to_coreml
from lowerkit.coreml_preprocess.recipe_file import load_recipe, parse_recipe
from lowerkit.pass_infra import sqnr_db

#: Run as a script in a fresh process (imported above so that Pants ships it with the test).
WORKER = Path(compression_worker.__file__)
THRESHOLD = 2048
#: A recipe with every method: 3-bit tables, pruning, int8 per channel, int4 per block, fp16.
MIXED = """
weight_threshold = 500

[global]
method = "palettize"
nbits = 3

[[rules]]
name = "stem stays fp16"
match = "stem.0"
method = "none"

[[rules]]
name = "stack3 int8 per channel"
match = "stack3.*"
method = "linear"
mode = "linear_symmetric"
dtype = "int8"
granularity = "per_channel"

[[rules]]
name = "stack2 convs pruned"
regex = 'stack2\\.conv[12]\\.0'
method = "prune"
target_sparsity = 0.5

[[rules]]
name = "classifier int4 per block"
op_type = "linear"
method = "linear"
dtype = "int4"
granularity = "per_block"
block_size = 16
"""


@pytest.fixture(scope="module")
def mixed_recipe(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("recipes") / "mixed.toml"
    path.write_text(MIXED)
    return path


@pytest.fixture(scope="module")
def lowered(mixed_recipe: Path) -> Callable[..., CoreMLLowering]:
    """lowered(model, option[, deployment_target]) -> CoreMLLowering, each lowered once per module."""
    cache: dict[tuple[str, str, str | None], CoreMLLowering] = {}

    def get(model: str, option: str, deployment_target: str | None = None) -> CoreMLLowering:
        key = (model, option, deployment_target)
        if key not in cache:
            entry = zoo.get(model)
            recipe, _, recipe_file = option.partition("+")
            compression = load_recipe(mixed_recipe) if recipe_file == "mixed" else None
            cache[key] = lower_to_coreml(
                entry.module(), entry.example_inputs(), recipe,
                deployment_target=deployment_target, weight_compression=compression,
            )
        return cache[key]

    return get


def _float_weights(lowering: CoreMLLowering) -> dict[str, np.ndarray]:
    """Every float const of the (uncompressed) converted program, by name."""
    program = lowering.mlmodel._mil_program
    weights: dict[str, np.ndarray] = {}
    for op in program.functions["main"].operations:
        value = op.outputs[0].val if op.op_type == "const" else None
        if isinstance(value, np.ndarray) and value.dtype == np.float16:
            weights[op.name] = value
    return weights


def _layer_weights(lowering: CoreMLLowering, op_types: tuple[str, ...]) -> set[str]:
    """Names of the consts above the threshold that an op of `op_types` reads as its weight."""
    program = lowering.mlmodel._mil_program
    names = set()
    for op in program.functions["main"].operations:
        if op.op_type in op_types:
            weight = op.inputs["weight"]
            if weight.op.op_type == "const" and weight.val.size > THRESHOLD:
                names.add(weight.op.name)
    return names


def _source(decoded_name: str) -> str:
    """The const a weight compressed after conversion came from; torchao's codebooks keep their op's name."""
    for suffix in ("_palettized", "_quantized", "_sparsified"):
        if decoded_name.endswith(suffix):
            return decoded_name[: -len(suffix)]
    assert decoded_name.startswith("quant_dequantize_codebook"), decoded_name
    return decoded_name


def test_palettization_equals_coremltools_on_the_same_converted_model(lowered):
    """lowerkit's compile option vs ``ct.optimize.coreml.palettize_weights`` on the same MLModel."""
    float_model = lowered("resnet8", "fp16", "iOS18")  # palettize6's deployment target
    ours = lowered("resnet8", "palettize6")
    config = cto.coreml.OptimizationConfig(
        global_config=cto.coreml.OpPalettizerConfig(
            nbits=6, mode="kmeans", granularity="per_grouped_channel", group_size=16, weight_threshold=THRESHOLD
        )
    )
    with threadpool_limits(limits=1):  # as lowerkit: k-means on one thread
        direct = cto.coreml.palettize_weights(float_model.mlmodel, config)
    theirs = decode_constexpr_weights(direct)
    mine = ours.decoded_weights[0]
    assert sorted(mine) == sorted(theirs)
    for name, value in theirs.items():
        np.testing.assert_array_equal(mine[name], value, err_msg=name)
    # Every conv and linear weight above the threshold is palettized.
    layers = _layer_weights(float_model, ("conv", "linear"))
    assert layers and {_source(n) for n in mine} == layers
    assert ours.reports[0].constexpr_ops == {"constexpr_lut_to_dense": len(layers)}


#: Lowest weight SQNR (dB) accepted per option, well below what resnet8 / MobileNetV1 reach.
_MIN_SQNR = {"palettize4": 18.0, "palettize6": 30.0}


@pytest.mark.parametrize(
    ("model", "option"),
    [("resnet8", "palettize4"), ("resnet8", "palettize6"), ("mobilenet_v1_025", "palettize4")],
)
def test_every_conv_and_linear_is_compressed_and_decodes_close_to_float(lowered, model, option):
    float_model = lowered(model, "fp16", "iOS18")
    compressed = lowered(model, option)
    decoded = compressed.decoded_weights[0]
    # Each conv / linear weight above the threshold has a compressed (decoded) counterpart. The
    # programs differ (palettize4's linears come from torchao), so const names do not carry over.
    convs = _layer_weights(float_model, ("conv",))
    by_conv = [
        d for d in compressed.compression
        if {r.op_type for r in d.readers} <= {"conv", "depthwise_conv"} and d.weight_size > THRESHOLD
    ]
    assert len(by_conv) == len(convs) and all(d.compressed for d in by_conv)
    assert all(f"{d.const_name}_palettized" in decoded for d in by_conv)
    linear_count = sum(1 for op in float_model.mlmodel._mil_program.functions["main"].operations if op.op_type == "linear")
    if option == "palettize6":
        assert {_source(n) for n in decoded} >= _layer_weights(float_model, ("linear",))
    else:  # palettize4: torchao's codebook on every nn.Linear (whatever its size), Core ML k-means on the rest
        assert sum(1 for n in decoded if n.startswith("quant_dequantize_codebook")) == linear_count
    # SQNR of each decoded weight against the fp16 weight of the float program it is closest to.
    floats = list(_float_weights(float_model).values())
    rows = []
    for name, value in sorted(decoded.items()):
        dense = value.astype(np.float32)
        sqnr = max(sqnr_db(f.astype(np.float32), dense) for f in floats if f.shape == value.shape)
        rows.append((name, value.shape, sqnr))
        assert sqnr >= _MIN_SQNR[option], f"{model} {option} {name}: SQNR {sqnr:.1f} dB"
    print(f"\n{model} {option}: weight SQNR vs fp16 (dB)")
    for name, shape, sqnr in rows:
        print(f"  {name:<46} {list(shape)!s:<18} {sqnr:6.2f}")


@pytest.mark.parametrize("model", ["resnet8", "mobilenet_v1_025"])
def test_palettize4_pte_is_at_most_40_percent_of_fp16(lowered, model):
    fp16 = len(lowered(model, "fp16", "iOS18").pte)  # palettize4's deployment target
    palettized = len(lowered(model, "palettize4").pte)
    print(f"\n{model}: fp16 {fp16:,} bytes, palettize4 {palettized:,} bytes ({palettized / fp16:.1%})")
    assert palettized <= 0.40 * fp16


def test_a_recipe_with_every_method_decodes_as_each_method_says(lowered):
    float_model = lowered("resnet8", "fp16", "iOS18")
    mixed = lowered("resnet8", "fp16+mixed")
    assert mixed.options.minimum_deployment_target.name == "iOS18"  # int4 per block needs it
    floats = _float_weights(float_model)
    decoded = {_source(n): (n, v.astype(np.float32)) for n, v in mixed.decoded_weights[0].items()}
    rules = {d.const_name: d for d in mixed.compression}
    assert {d.rule for d in mixed.compression if d.compressed} == {
        "global", "stack3 int8 per channel", "stack2 convs pruned", "classifier int4 per block",
    }
    for source, decision in rules.items():
        if not decision.compressed:
            assert source not in decoded
            continue
        name, value = decoded[source]
        original = floats[source].astype(np.float32)
        flat, dense = value.reshape(value.shape[0], -1), original.reshape(original.shape[0], -1)
        if decision.rule == "global":  # 3-bit tables, one per tensor
            assert name.endswith("_palettized") and len(np.unique(value)) <= 8
        elif decision.rule == "stack2 convs pruned":  # the smaller half of the values set to 0
            assert name.endswith("_sparsified")
            kept = value != 0
            assert kept.mean() <= 0.5
            np.testing.assert_array_equal(value[kept], original[kept])
            assert np.abs(original[~kept]).max() <= np.abs(original[kept]).min()
        elif decision.rule == "stack3 int8 per channel":  # error within half a step + fp16 rounding
            step = np.abs(dense).max(axis=1, keepdims=True) / 127
            assert np.all(np.abs(flat - dense) <= step * 0.5 + np.abs(dense) * 2**-10 + 1e-6)
        else:  # int4, blocks of 16 input columns
            blocks = dense.reshape(dense.shape[0], -1, 16)
            step = np.abs(blocks).max(axis=2, keepdims=True) / 7
            error = np.abs(flat.reshape(blocks.shape) - blocks)
            assert np.all(error <= step * 0.5 + np.abs(blocks) * 2**-10 + 1e-6)
    assert {d.rule for d in mixed.compression if not d.compressed and d.readers[0].module_path == "stem.0"} == {
        "stem stays fp16"
    }


_OPTIONS = ["palettize2", "palettize3", "palettize4", "palettize6", "palettize8", "fp16+mixed"]
#: Enumerated shapes (test_shapes.py) ride along: one fresh process for every new option.
SHAPES_ITEM = "conv_linear:fp16@x=1x3x16x16,1x3x32x32"


def test_same_pte_bytes_in_another_process_for_every_new_option(lowered, mixed_recipe):
    from lowerkit.coreml_preprocess.shapes import parse_shapes

    here = {f"resnet8:{option}": lowered("resnet8", option).pte_sha256 for option in _OPTIONS}
    entry = zoo.get("conv_linear")
    here[SHAPES_ITEM] = lower_to_coreml(
        entry.module(), entry.example_inputs(), "fp16", enumerated_shapes=parse_shapes(SHAPES_ITEM.split("@")[1])
    ).pte_sha256
    items = [item.replace("+mixed", f"+{mixed_recipe}") for item in here]
    run = subprocess.run([sys.executable, str(WORKER), *items], capture_output=True, text=True, check=False)
    assert run.returncode == 0, run.stderr[-3000:]
    there: dict[str, Any] = json.loads(run.stdout.strip().splitlines()[-1])
    assert [there[item] for item in items] == list(here.values())
    assert len(set(here.values())) == len(here)  # the options do differ


def _fails(model: str, recipe: str) -> str:
    entry = zoo.get(model)
    with pytest.raises(CoreMLOptionsError) as error:
        lower_to_coreml(entry.module(), entry.example_inputs(), "fp16", weight_compression=parse_recipe(recipe))
    message = str(error.value)
    assert "\n" not in message
    return message


def test_a_rule_selecting_nothing_is_an_error_naming_it():
    message = _fails("conv_linear", '[global]\nmethod = "palettize"\nnbits = 4\n[[rules]]\nname = "head"\nmatch = "head*"\nmethod = "none"')
    assert message.startswith("rule 'head' selects no weight of the model")


def test_conflicting_rules_are_an_error_naming_both():
    recipe = (
        'weight_threshold = 0\n[[rules]]\nname = "convs 4-bit"\nop_type = "conv"\nmethod = "palettize"\nnbits = 4\n'
        '[[rules]]\nname = "conv fp16"\nmatch = "conv"\nmethod = "none"'
    )
    message = _fails("conv_linear", recipe)
    assert "rules 'convs 4-bit' and 'conv fp16' both select conv 'conv' with different settings" in message


def test_a_tied_embedding_with_two_settings_is_an_error():
    message = _fails("tiny_lm", '[global]\nmethod = "palettize"\nnbits = 4\n[[rules]]\nname = "head fp16"\nmatch = "head"\nmethod = "none"')
    assert "is shared by gather 'embedding' and linear 'head' (e.g. a tied embedding table)" in message
    assert "the global setting and rule 'head fp16' give it different settings" in message


def test_a_group_core_ml_cannot_form_is_an_error_naming_the_rule():
    recipe = (
        'weight_threshold = 0\n[[rules]]\nname = "grouped"\nmatch = "conv"\nmethod = "palettize"\nnbits = 4\n'
        'granularity = "per_grouped_channel"\ngroup_size = 3'
    )
    message = _fails("conv_linear", recipe)
    assert message.startswith("rule 'grouped': Core ML cannot palettize conv 'conv' per grouped channel")
    assert "8 output channels are not divisible by group_size 3" in message
