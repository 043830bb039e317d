"""Lower zoo models with lowerkit's new Core ML options in a fresh process; print {item: .pte sha256}.

    python compression_worker.py MODEL:OPTION [MODEL:OPTION ...]

An OPTION is ``RECIPE[+RECIPE_FILE][@SHAPES]``: a recipe name (``palettize4``), optionally with a
TOML compression recipe file and enumerated shapes (``x=1x3x16x16,1x3x32x32``). Used by
test_compression.py and test_shapes.py to check the bytes do not depend on the process.
"""

from __future__ import annotations

import json
import sys


def lower(item: str) -> str:
    """The sha256 of the .pte of ``MODEL:OPTION``."""
    from lowerkit import zoo
    from lowerkit.coreml_preprocess import lower_to_coreml
    from lowerkit.coreml_preprocess.recipe_file import load_recipe
    from lowerkit.coreml_preprocess.shapes import parse_shapes

    model_name, _, option = item.partition(":")
    option, _, shapes = option.partition("@")
    recipe, _, path = option.partition("+")
    entry = zoo.get(model_name)
    lowering = lower_to_coreml(
        entry.module(), entry.example_inputs(), recipe,
        weight_compression=load_recipe(path) if path else None,
        enumerated_shapes=parse_shapes(shapes) if shapes else None,
    )
    return lowering.pte_sha256


if __name__ == "__main__":
    print(json.dumps({item: lower(item) for item in sys.argv[1:]}))
