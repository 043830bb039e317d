import pytest
import torch

from lowerkit import zoo

EXPECTED = {"conv_linear", "cnn9_layernorm", "resnet8", "mobilenet_v1_025", "ds_cnn", "tiny_lm"}


def test_zoo_lists_the_agreed_models():
    assert set(zoo.names()) == EXPECTED


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_models_are_deterministic_and_exportable(name):
    entry = zoo.get(name)
    first, second = entry.module(), entry.module()
    for a, b in zip(first.state_dict().values(), second.state_dict().values(), strict=True):
        assert torch.equal(a, b)
    inputs = entry.example_inputs()
    assert all(torch.equal(a, b) for a, b in zip(inputs, entry.example_inputs(), strict=True))
    expected = first(*inputs)
    exported = torch.export.export(first, inputs)
    assert torch.allclose(exported.module()(*inputs), expected)
    batches = entry.calibration(3)
    assert len(batches) == 3
    assert all(b[0].shape == inputs[0].shape and b[0].dtype == inputs[0].dtype for b in batches)
    assert not torch.equal(batches[0][0], batches[1][0])


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_outputs_depend_on_the_input(name):
    """Activations keep their scale through every model, so numerics checks compare real signal."""
    entry = zoo.get(name)
    module = entry.module()
    with torch.no_grad():
        outputs = [module(*batch) for batch in entry.calibration(4)]
    spread = max(float((a - outputs[0]).abs().max()) for a in outputs[1:])
    assert spread > 0.02 * float(outputs[0].abs().max()), (name, spread)


def test_parameter_counts_match_their_descriptions():
    assert 45_000 <= zoo.get("cnn9_layernorm").parameter_count() <= 65_000
    assert 70_000 <= zoo.get("resnet8").parameter_count() <= 85_000


def test_tiny_lm_ties_embedding_to_head():
    module = zoo.get("tiny_lm").module()
    assert module.head.weight is module.embedding.weight


def test_unknown_name_suggests_and_lists():
    with pytest.raises(KeyError, match=r"Did you mean 'resnet8'.*Valid names"):
        zoo.get("resnet9")
