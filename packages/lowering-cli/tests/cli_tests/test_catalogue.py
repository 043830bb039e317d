"""The torch-free zoo catalogue (what `lowerkit zoo` lists) agrees with the models themselves."""

from lowerkit import zoo
from lowerkit.zoo import catalogue


def test_catalogue_agrees_with_the_registry():
    assert catalogue.names() == zoo.names()
    for entry, model in zip(catalogue.ENTRIES, zoo.models(), strict=True):
        assert entry.name == model.name
        assert entry.description == model.description
        assert entry.backends == model.backends
        assert entry.parameters == model.parameter_count(), entry.name
        assert entry.input_shapes == tuple(tuple(t.shape) for t in model.example_inputs()), entry.name
