"""The zoo's weights and inputs are the same bits on every CPU (torch's scalar kernels vs this one's)."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import torch

from lowerkit import zoo
from lowerkit.zoo.registry import portable_init

_DIGESTS = """
import hashlib, json, sys
import torch
from lowerkit import zoo

def digest(t):
    return hashlib.sha256(t.detach().contiguous().numpy().tobytes()).hexdigest()

out = {}
for m in zoo.models():
    for key, value in m.module().state_dict().items():
        out[f"{m.name}.{key}"] = digest(value)
    for i, t in enumerate(m.example_inputs()):
        out[f"{m.name}.input{i}"] = digest(t)
    for j, batch in enumerate(m.calibration(2)):
        for i, t in enumerate(batch):
            out[f"{m.name}.calibration{j}.{i}"] = digest(t)
out["capability"] = torch.backends.cpu.get_cpu_capability()
json.dump(out, sys.stdout)
"""


def _digests(capability: str | None) -> dict[str, str]:
    env = dict(os.environ)
    env.pop("ATEN_CPU_CAPABILITY", None)
    if capability:
        env["ATEN_CPU_CAPABILITY"] = capability
    done = subprocess.run(
        [sys.executable, "-c", _DIGESTS], env=env, capture_output=True, text=True, check=True
    )
    result: dict[str, str] = json.loads(done.stdout)
    return result


def test_weights_and_inputs_do_not_depend_on_the_cpu_capability() -> None:
    native, scalar = _digests(None), _digests("default")
    assert scalar.pop("capability") == "DEFAULT"
    native.pop("capability")
    assert len(native) > 300
    differing = sorted(k for k in native if native[k] != scalar[k])
    assert not differing, f"differ between this CPU's kernels and torch's scalar ones: {differing[:5]}"


def test_portable_init_draws_pytorchs_default_ranges_and_ties_once() -> None:
    linear = torch.nn.Linear(64, 8)
    tied = torch.nn.Sequential(torch.nn.Embedding(10, 64), torch.nn.Linear(64, 10, bias=False))
    tied[1].weight = tied[0].weight
    portable_init(linear, torch.Generator().manual_seed(0))
    portable_init(tied, torch.Generator().manual_seed(0))
    bound = 1 / 64**0.5
    assert linear.weight.abs().max() <= bound and linear.weight.abs().max() > 0.9 * bound
    assert linear.bias.abs().max() <= bound
    assert tied[1].weight is tied[0].weight
    assert 0.9 < float(tied[0].weight.std()) < 1.1  # unit variance, drawn once


def test_batch_norm_statistics_keep_activations_alive() -> None:
    """Deep zoo CNNs' outputs still depend on their input (statistics from samples)."""
    for name in ("resnet8", "mobilenet_v1_025", "ds_cnn"):
        entry = zoo.get(name)
        module = entry.module()
        with torch.no_grad():
            outputs = [module(*batch) for batch in entry.calibration(2)]
        assert not torch.allclose(outputs[0], outputs[1], rtol=1e-3, atol=1e-4), name
        assert float(outputs[0].abs().max()) > 1e-2, name

