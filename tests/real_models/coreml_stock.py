"""ExecuTorch's side of the Core ML real-model sameness test, run in a process of its own.

lowerkit's and ExecuTorch's Core ML backends cannot share a process (same backend id), so the
test runs

    python -m real_models.coreml_stock CASES.json OUT.json

CASES.json is a list of ``[model, target]`` (``real_models.cases.CI_MODELS`` x
``bench.realworld_flows.COREML_TARGETS``); OUT.json maps ``"model target"`` to the list, per
delegate, of ``{file name: sha256}`` of the canonical payload (``canonical_payload``).
"""

from __future__ import annotations

import hashlib
import json
import sys
from pathlib import Path

from bench.realworld_flows import canonical_payload, lower
from real_models.cases import ci_model


def canonical_files(payloads: list[bytes]) -> list[dict[str, str]]:
    """Per payload, sha256 of every canonical file (so a difference names its file)."""
    return [
        {name: hashlib.sha256(data).hexdigest() for name, data in canonical_payload(p).items()} for p in payloads
    ]


def main() -> None:
    cases = json.loads(Path(sys.argv[1]).read_text())
    results = {}
    for model_name, target in cases:
        model = ci_model(model_name)
        lowered = lower("stock", model.module, model.example_inputs, target, model.calibration)
        results[f"{model_name} {target}"] = canonical_files(lowered.payloads)
    Path(sys.argv[2]).write_text(json.dumps(results))


if __name__ == "__main__":
    main()
