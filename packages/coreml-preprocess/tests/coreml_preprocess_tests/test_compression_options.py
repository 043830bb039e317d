"""Weight compression as a compile option and recipe files: encodings, validation, one-line errors.

Nothing here converts or compresses a model (see tests/coreml_preprocess/test_compression.py).
"""

from __future__ import annotations

import pytest

from lowerkit.coreml_preprocess import (
    CompressionRule,
    CoreMLCompileOptions,
    CoreMLOptionsError,
    SpecKey,
    WeightCompression,
    compile_options_for,
    get_recipe,
)
from lowerkit.coreml_preprocess.layer_paths import WeightReader
from lowerkit.coreml_preprocess.recipe_file import load_recipe, parse_recipe, recipe_toml

RECIPE = """
weight_threshold = 1024

[global]
method = "palettize"
nbits = 4
granularity = "per_grouped_channel"
group_size = 16

[[rules]]
name = "first conv and classifier stay fp16"
regex = 'stem\\.0|fc'
method = "none"

[[rules]]
name = "depthwise 6-bit"
op_type = "depthwise_conv"
method = "palettize"
nbits = 6

[[rules]]
match = "blocks.*.mlp.*"
method = "linear"
dtype = "int4"
granularity = "per_block"
block_size = 32

[[rules]]
name = "prune"
match = "stack3.*"
method = "prune"
target_sparsity = 0.5
"""


def test_recipe_file_parses_and_round_trips(tmp_path):
    path = tmp_path / "recipe.toml"
    path.write_text(RECIPE)
    compression = load_recipe(path)
    assert compression.weight_threshold == 1024
    assert compression.global_config == {
        "method": "palettize", "nbits": 4, "granularity": "per_grouped_channel", "group_size": 16, "mode": "kmeans",
    }
    names = [r.name for r in compression.rules]
    assert names == ["first conv and classifier stay fp16", "depthwise 6-bit", "rules[3]", "prune"]
    assert compression.rules[0].config is None
    assert compression.rules[3].config == {"method": "prune", "target_sparsity": 0.5}
    assert parse_recipe(recipe_toml(compression)) == compression
    assert compression.minimum_deployment_target() == "iOS18"


def test_compile_specs_round_trip_and_stay_inert_for_executorch():
    compression = parse_recipe(RECIPE)
    options = CoreMLCompileOptions(minimum_deployment_target="iOS18", weight_compression=compression)
    specs = options.to_compile_specs()
    keys = [s.key for s in specs]
    assert keys[-1] == SpecKey.WEIGHT_COMPRESSION.value == "lowerkit.weight_compression"
    assert CoreMLCompileOptions.from_compile_specs(specs) == options
    assert CoreMLCompileOptions.from_compile_specs(specs).weight_compression == compression
    # Without compression the specs are ExecuTorch's, key for key.
    plain = CoreMLCompileOptions(minimum_deployment_target="iOS18").to_compile_specs()
    assert [s.key for s in plain] == keys[:-1]


def test_the_encoding_is_deterministic():
    assert parse_recipe(RECIPE).to_json() == parse_recipe(RECIPE).to_json()
    assert WeightCompression.from_json(parse_recipe(RECIPE).to_json()) == parse_recipe(RECIPE)


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("wieght_threshold = 3", "r.toml: unknown key 'wieght_threshold'. Did you mean 'weight_threshold'?"),
        ('[global]\nmethod = "palettize"\nnbit = 4', "global setting: unknown key 'nbit' for method 'palettize'. Did you mean 'nbits'?"),
        ('[[rules]]\nname = "x"\nmach = "a"\nmethod = "none"', "rule 'x': unknown key 'mach'"),
        ('[[rules]]\nname = "x"\nmach = "a"\nmethod = "palettize"\nnbits = 4', "rule 'x': unknown key 'mach'. Did you mean 'match'?"),
        ('[[rules]]\nname = "x"\nop_type = "depthwise"\nmethod = "none"', "rule 'x': unknown op_type 'depthwise'. Did you mean 'depthwise_conv'?"),
        ('[[rules]]\nname = "x"\nop_type = "batch_norm"\nmethod = "none"', "rule 'x': Core ML does not compress batch_norm weights: coremltools folds"),
        ('[[rules]]\nname = "x"\nop_type = "gather"\nmethod = "prune"\nn_m_ratio = [1, 2]', "rule 'x': Core ML cannot prune gather weights with block or n:m structure"),
        ('[global]\nmethod = "palettize"\nnbits = 5', "palettize needs 'nbits' in [1, 2, 3, 4, 6, 8], got 5"),
        ('[global]\nmethod = "palettise"\nnbits = 4', "'method' must be one of palettize, linear, prune, none, got 'palettise'. Did you mean 'palettize'?"),
        ('[[rules]]\nname = "x"\nmatch = "a"\nmethod = "palettize"\nnbits = 4\nnum_kmeans_workers = 4', "rule 'x': 'num_kmeans_workers' is set by lowerkit"),
        ('[[rules]]\nname = "x"\nmatch = "a"\nregex = "b"\nmethod = "none"', "rule 'x' has both 'match' and 'regex'"),
        ('[[rules]]\nname = "x"\nmethod = "none"', "rule 'x' selects nothing"),
        ('[[rules]]\nname = "x"\nregex = "(("\nmethod = "none"', "rule 'x': invalid regex '(('"),
        ('[[rules]]\nname = "x"\nmatch = "a"\n', "rule 'x' has no 'method'"),
        ('[[rules]]\nname = "x"\nmatch = "a"\nmethod = "none"\n[[rules]]\nname = "x"\nmatch = "b"\nmethod = "none"', "two rules are named 'x'"),
        ('[[rules]]\nname = "x"\nmatch = "a"\nmethod = "none"', "compresses nothing"),
        ('[[rules]]\nname = "x"\nmatch = "a"\nmethod = "linear"\ndtype = "int3"', "rule 'x': invalid linear setting"),
        ("x = [", "r.toml: not valid TOML"),
        ('[[rules]]\nname = "global"\nmatch = "a"\nmethod = "none"', "a rule cannot be named 'global'"),
    ],
)
def test_bad_recipes_are_one_line_errors_naming_the_rule(text, message):
    with pytest.raises(CoreMLOptionsError) as error:
        parse_recipe(text, source="r.toml")
    assert message in str(error.value)
    assert "\n" not in str(error.value)
    assert str(error.value).startswith("r.toml: ")


def test_missing_recipe_file_is_one_line(tmp_path):
    with pytest.raises(CoreMLOptionsError, match=r"cannot read recipe file .*missing\.toml"):
        load_recipe(tmp_path / "missing.toml")


def _reader(op_type: str, path: str) -> WeightReader:
    return WeightReader(op_type, path, "op")


def test_rules_select_by_glob_regex_and_op_type():
    config = {"method": "palettize", "nbits": 6}
    glob = CompressionRule("g", config, match="stack*.conv1.0")
    regex = CompressionRule("r", config, regex=r"stem\.0|fc")
    depthwise = CompressionRule("d", config, op_type="depthwise_conv")
    both = CompressionRule("b", config, match="features.*", op_type="conv")
    assert glob.selects(_reader("conv", "stack2.conv1.0")) and not glob.selects(_reader("conv", "stack2.conv2.0"))
    assert regex.selects(_reader("linear", "fc")) and not regex.selects(_reader("conv", "stem.01"))
    assert depthwise.selects(_reader("depthwise_conv", "")) and not depthwise.selects(_reader("conv", "x"))
    assert both.selects(_reader("conv", "features.3.0")) and not both.selects(_reader("depthwise_conv", "features.3.0"))


def test_recipes_compress_every_weighted_op():
    palettize4 = get_recipe("palettize4")
    assert palettize4.torch_quantization == "palettize4"  # linears: torchao's codebook, as before
    assert palettize4.weight_compression is not None
    assert palettize4.weight_compression.global_config == {
        "method": "palettize", "nbits": 4, "mode": "kmeans", "granularity": "per_grouped_channel", "group_size": 16,
    }
    for bits in (2, 3, 6, 8):
        recipe = get_recipe(f"palettize{bits}")
        assert recipe.weight_compression is not None and recipe.torch_quantization is None
        assert recipe.weight_compression.global_config is not None
        assert recipe.weight_compression.global_config["nbits"] == bits
        assert compile_options_for(recipe).weight_compression == recipe.weight_compression


def test_a_recipe_file_goes_with_float_recipes_only():
    compression = parse_recipe('[global]\nmethod = "palettize"\nnbits = 4')
    options = compile_options_for("fp16", weight_compression=compression)
    assert options.weight_compression == compression
    assert options.minimum_deployment_target.name == "iOS16"  # per-tensor tables: iOS16
    grouped = parse_recipe(RECIPE)
    assert compile_options_for("fp32", weight_compression=grouped).minimum_deployment_target.name == "iOS18"
    with pytest.raises(CoreMLOptionsError, match="needs deployment target iOS18"):
        compile_options_for("fp16", weight_compression=grouped, deployment_target="iOS17")
    for recipe in ("w8", "palettize4", "int8"):
        with pytest.raises(CoreMLOptionsError, match=f"recipe '{recipe}' compresses weights itself"):
            compile_options_for(recipe, weight_compression=compression)
