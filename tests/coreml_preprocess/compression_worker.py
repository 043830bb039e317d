"""Lower a zoo model with each compression option in a fresh process; print {option: .pte sha256}.

    python compression_worker.py MODEL OPTION [OPTION ...]

An OPTION is a recipe name (``palettize4``) or ``fp16+PATH`` (fp16 with the TOML recipe at PATH).
Used by test_compression.py to check the bytes do not depend on the process.
"""

from __future__ import annotations

import json
import sys


def lower(model_name: str, option: str) -> str:
    """The sha256 of the .pte of `model_name` lowered with `option`."""
    from lowerkit import zoo
    from lowerkit.coreml_preprocess import lower_to_coreml
    from lowerkit.coreml_preprocess.recipe_file import load_recipe

    entry = zoo.get(model_name)
    recipe, _, path = option.partition("+")
    compression = load_recipe(path) if path else None
    lowering = lower_to_coreml(entry.module(), entry.example_inputs(), recipe, weight_compression=compression)
    return lowering.pte_sha256


if __name__ == "__main__":
    model, *options = sys.argv[1:]
    print(json.dumps({option: lower(model, option) for option in options}))
