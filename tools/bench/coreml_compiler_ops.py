"""lowerkit.coreml_compiler_ops against upstream, side by side in one process.

1. ``ct.convert`` of a torchao IntxWeightOnlyConfig (int4, per-group) embedding+linear model
   with ExecuTorch 1.5.1's Core ML translations registered, then with lowerkit's (registry
   entries swapped with ``unregister()`` / ``register()``; both give the same MIL).
2. Decoding every constexpr weight of a converted model: coremltools' own per-op
   ``materialized_val_inference`` (upstream's only Linux route) against
   ``decode_constexpr_weights`` (numpy, on the serialized spec and weights file).

    python -m bench.coreml_compiler_ops [--repeat N] [--json out.json]
"""

from __future__ import annotations

import argparse
from typing import Any

import numpy as np
import torch
from torch import nn

from bench.harness import Comparison, Contender, compare, write_json


class EmbedLinear(nn.Module):
    def __init__(self, vocab: int, dim: int, out: int) -> None:
        super().__init__()
        self.emb = nn.Embedding(vocab, dim)
        self.lin = nn.Linear(dim, out)

    def forward(self, tokens: torch.Tensor) -> torch.Tensor:
        return self.lin(self.emb(tokens))


def _program() -> Any:
    from torchao.quantization import IntxWeightOnlyConfig, quantize_
    from torchao.quantization.granularity import PerGroup

    torch.manual_seed(0)
    model = EmbedLinear(4096, 256, 1024).eval()
    quantize_(
        model,
        IntxWeightOnlyConfig(weight_dtype=torch.int4, granularity=PerGroup(32)),
        filter_fn=lambda m, fqn: isinstance(m, (nn.Embedding, nn.Linear)),
    )
    tokens = torch.arange(16, dtype=torch.int64).reshape(2, 8)
    return torch.export.export(model, (tokens,)).run_decompositions({})


def _convert(program: Any) -> Any:
    import coremltools as ct

    return ct.convert(
        program,
        source="pytorch",
        convert_to="mlprogram",
        minimum_deployment_target=ct.target.iOS18,
        skip_model_load=True,
    )


def _coremltools_decode(mlmodel: Any) -> dict[str, np.ndarray]:
    return {
        op.outputs[0].name: np.asarray(op.materialized_val_inference())
        for op in mlmodel._mil_program.functions["main"].operations
        if op.op_type.startswith("constexpr_")
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--json", help="write the comparisons here")
    args = parser.parse_args()

    import executorch.backends.apple.coreml.compiler.torch_ops  # noqa: F401  (upstream's translations)

    from lowerkit.coreml_compiler_ops import decode_constexpr_weights, register, unregister

    program = _program()

    def upstream_convert() -> None:
        unregister()
        _convert(program)

    def lowerkit_convert() -> None:
        register()
        _convert(program)

    comparisons: list[Comparison] = [
        compare(
            Contender("executorch translations", upstream_convert),
            Contender("lowerkit translations", lowerkit_convert),
            repeat=args.repeat,
            warmup=1,
            title="ct.convert, int4 per-group embedding+linear (4096x256, 1024x256)",
        )
    ]
    register()
    mlmodel = _convert(program)
    ours, theirs = decode_constexpr_weights(mlmodel), _coremltools_decode(mlmodel)
    assert ours.keys() == theirs.keys()
    for name, value in theirs.items():
        np.testing.assert_array_equal(ours[name], value)
    comparisons.append(
        compare(
            Contender(
                "coremltools materialized_val_inference", lambda: _coremltools_decode(mlmodel)
            ),
            Contender(
                "lowerkit decode_constexpr_weights", lambda: decode_constexpr_weights(mlmodel)
            ),
            repeat=args.repeat,
            warmup=1,
            title="decode every constexpr weight (same values checked first)",
        )
    )
    for comparison in comparisons:
        print(comparison.table())
    if args.json:
        write_json(comparisons, args.json)


if __name__ == "__main__":
    main()
