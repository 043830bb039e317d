"""The CI-sized real models the sameness tests lower: a CNN, a transformer, a recurrent model, and
timm's DeiT (two blocks of timm's attention: ``qkv.unbind(0)`` + SDPA).

Built by `bench.corpus` (the benchmark's corpus, through the CLI's model sources), the CNN at a
reduced input size (``--image-size``) to keep CI short. Shared by the tests and the stock Core ML
script (`real_models.coreml_stock`), which builds the very same models in its own process.
"""

from __future__ import annotations

from bench.corpus import Model, load

#: name -> image side (the CLI's --image-size; None: the source's own example inputs).
CI_MODELS: dict[str, int | None] = {
    "tv:resnet18": 64, "hf:bert_tiny": None, "et:lstm": None, "hf:deit_2l_timm": None,
}  # fmt: skip


def ci_model(name: str) -> Model:
    """Corpus model `name` at its CI size (`CI_MODELS`)."""
    return load(name, image_size=CI_MODELS[name])
