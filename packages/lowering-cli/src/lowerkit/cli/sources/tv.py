"""`tv:NAME`: a torchvision classification model by name, untrained unless `--weights FILE`.

torchvision and timm are imported only here, and are optional: neither the `lowerkit` wheel nor
the PEX depends on them (`no-infer-dep` below), because a torchvision built for another torch
breaks transformers too (it imports torchvision whenever it is installed), and PyPI's torchvision
wheels are built for the CUDA torch. A failure to import them is one line naming the cause: a torchvision wheel whose compiled ops were built for another torch than the
installed one fails with "operator torchvision::nms does not exist" (timm imports torchvision).
"""

from __future__ import annotations

from types import ModuleType
from typing import TYPE_CHECKING

from lowerkit.cli.errors import UsageError
from lowerkit.cli.sources.options import DEFAULT, SourceOptions
from lowerkit.pass_infra.helpers.suggest import did_you_mean

if TYPE_CHECKING:
    from lowerkit.cli.sources.model import ModelSource

#: The seed of the untrained weights and the example input.
SEED = 0

#: Example image size per model where 224 is not the one its weights were trained at.
IMAGE_SIZES = {"inception_v3": 299}


def import_torchvision(what: str) -> ModuleType:
    """`torchvision.models`, or a UsageError naming why torchvision cannot import here."""
    try:
        import torchvision.models  # pants: no-infer-dep
    except Exception as error:
        raise UsageError(f"{what}: torchvision cannot import here: {_cause(error)}") from None
    return torchvision.models


def import_timm(what: str) -> ModuleType:
    """`timm`, or a UsageError naming why it cannot import here."""
    try:
        import timm  # pants: no-infer-dep
    except Exception as error:
        raise UsageError(f"{what}: timm cannot import here: {_cause(error)}") from None
    return timm


def torchvision_failure(error: BaseException) -> str | None:
    """The explained torchvision import failure behind `error` (its causes included), or None.

    transformers imports torchvision whenever it is installed, so a torchvision that cannot
    import breaks transformers' model classes too.
    """
    seen: BaseException | None = error
    while seen is not None:
        if "torchvision::" in str(seen):
            return _cause(seen)
        seen = seen.__cause__ or seen.__context__
    return None


def _cause(error: BaseException) -> str:
    text = str(error).strip().splitlines()[0] if str(error).strip() else "no detail"
    if isinstance(error, ModuleNotFoundError):
        return f"{text}; install it (pip install {error.name or 'torchvision'})"
    if "torchvision::" in text:
        import torch

        return (
            f"{type(error).__name__}: {text}: the installed torchvision's compiled ops were built for another torch "
            f"than this {torch.__version__}; install the torchvision build matching your torch "
            "(for a +cpu torch: pip install torchvision --index-url https://download.pytorch.org/whl/cpu) or uninstall it"
        )
    return f"{type(error).__name__}: {text}"


def names() -> list[str]:
    """torchvision's classification model names (imports torchvision)."""
    models = import_torchvision("tv:")
    return sorted(models.list_models(module=models))


def load(name: str, options: SourceOptions = DEFAULT) -> ModelSource:
    """Build torchvision model `name` with weights=None (seeded), then `options.weights` if given."""
    import torch

    from lowerkit.cli.sources import weights
    from lowerkit.cli.sources.model import ModelSource

    if options.task is not None or options.sequence_length is not None:
        raise UsageError(f"tv:{name} is an image classifier: --task and --sequence-length apply to hf:")
    if options.random_weights:
        raise UsageError(f"tv:{name} is untrained unless --weights FILE is given; drop --random-weights")
    models = import_torchvision(f"tv:{name}")
    known = sorted(models.list_models(module=models))
    if name not in known:
        raise UsageError(f"torchvision has no classification model '{name}'.{did_you_mean(name, known, n=3)} (see 'lowerkit models --check')")
    size = options.image_size or IMAGE_SIZES.get(name, 224)
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(SEED)
        try:
            module: torch.nn.Module = models.get_model(name, weights=None).eval()
        except Exception as error:
            raise UsageError(f"building tv:{name} failed: {type(error).__name__}: {error}") from None
        example = torch.randn(1, 3, size, size)
    notes: tuple[str, ...] = ()
    if options.weights is not None:
        weights.load_into(module, options.weights, model=f"tv:{name}")
    else:
        notes = (f"tv:{name} has random (untrained) weights: torchvision weights=None (give --weights FILE for trained ones)",)
    return ModelSource(name=name, example_inputs=(example,), module=module, notes=notes)
