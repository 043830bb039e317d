"""The torch-free zoo catalogue (what `lowerkit zoo` lists) agrees with the models themselves.

The registry builds each model from its catalogue entry (name, description, input shape,
backends), so what is left to agree is what only building a model shows: its parameters and
the shapes its inputs' maker gives."""

from lowerkit import zoo
from lowerkit.zoo import catalogue


def test_catalogue_agrees_with_the_registry():
    for entry, model in zip(catalogue.ENTRIES, zoo.models(), strict=True):
        assert entry.parameters == model.parameter_count(), entry.name
        assert entry.input_shapes == tuple(tuple(t.shape) for t in model.example_inputs()), entry.name
