"""Converts a fixed set of programs with one registration setup; prints JSON for the parity test.

Run as ``python parity_worker.py MODE`` where MODE is one of:
  executorch                 ExecuTorch 1.5.1's Core ML translations only (lowerkit never imported)
  lowerkit                   lowerkit's register() only (ExecuTorch's Core ML modules never imported)
  lowerkit_then_executorch   register(), then import ExecuTorch's translations
  executorch_then_lowerkit   import ExecuTorch's translations, then register()
Each case's result is the final MIL program text (block numbers removed) plus a digest of every
constant's bytes, or "ERROR <type>: <message>".
"""

from __future__ import annotations

import hashlib
import json
import re
import sys
from collections.abc import Callable
from typing import Any

import coremltools as ct
import numpy as np
import torch
from torch import nn

ET_TORCH_OPS = "executorch.backends.apple.coreml.compiler.torch_ops"


class EmbedLinear(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.emb = nn.Embedding(64, 32)
        self.lin = nn.Linear(32, 16)

    def forward(self, tokens: torch.Tensor) -> torch.Tensor:
        return self.lin(self.emb(tokens))


class LayoutOps(nn.Module):
    """Edge dialect turns these into split_copy / split_with_sizes_copy, _clone_dim_order, _to_dim_order_copy."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        a, b = torch.ops.aten.split_copy.Tensor(x, 2, 1)
        c, d = torch.split(x, [1, 3], dim=1)
        return a.clone() + b.to(torch.float16).to(torch.float32) + c * d[:, :1]


def _embed_linear() -> EmbedLinear:
    torch.manual_seed(0)
    return EmbedLinear().eval()


def _codebook(code_dtype: torch.dtype, nbits: int, block_size: list[int]) -> nn.Module:
    from torchao.prototype.quantization.codebook_coreml import CodebookQuantizedTensor

    model = _embed_linear()
    generator = torch.Generator().manual_seed(nbits)
    for layer in (model.emb, model.lin):
        n, k = layer.weight.shape
        rows = n if block_size[0] == -1 else block_size[0]
        cols = k if block_size[1] == -1 else block_size[1]
        codes = torch.randint(0, 2**nbits, (n, k), generator=generator, dtype=torch.uint8)
        codebook = torch.randn(n // rows, k // cols, 2**nbits, 1, generator=generator)
        weight = CodebookQuantizedTensor(
            codes, codebook, code_dtype, block_size, layer.weight.shape, dtype=torch.float32
        )
        layer.weight = nn.Parameter(weight, requires_grad=False)
    return model


def _torchao(config: Any) -> nn.Module:
    from torchao.quantization import quantize_

    model = _embed_linear()
    quantize_(model, config, filter_fn=lambda m, fqn: isinstance(m, (nn.Embedding, nn.Linear)))
    return model


def _aten(model: nn.Module) -> Any:
    tokens = torch.arange(10, dtype=torch.int64).reshape(2, 5)
    return torch.export.export(model, (tokens,)).run_decompositions({})


def _edge(model: nn.Module, inputs: tuple[Any, ...]) -> Any:
    """Edge dialect as ExecuTorch's Core ML partitioner sees it (quantization ops kept whole)."""
    from executorch.exir import EdgeCompileConfig, to_edge

    config = EdgeCompileConfig(
        _check_ir_validity=False,
        preserve_ops=[
            torch.ops.quant.dequantize_codebook.default,
            torch.ops.torchao.dequantize_affine.default,
        ],
    )
    return to_edge(torch.export.export(model, inputs), compile_config=config).exported_program()


def _cases() -> dict[str, tuple[Callable[[], Any], Any]]:
    from torchao.quantization import Int8WeightOnlyConfig, IntxWeightOnlyConfig
    from torchao.quantization.granularity import PerAxis, PerGroup

    ios16, ios18 = ct.target.iOS16, ct.target.iOS18
    # Cases ExecuTorch 1.5.1 converts come first and cases only lowerkit converts last, so that a
    # failing case cannot shift coremltools' name counters for the cases that are compared.
    cases: dict[str, tuple[Callable[[], Any], Any]] = {
        "codebook_uint4_per_tensor_ios18": (
            lambda: _aten(_codebook(torch.uint4, 4, [-1, -1])),
            ios18,
        ),
        "codebook_uint3_column_blocks_ios18": (
            lambda: _aten(_codebook(torch.uint3, 3, [-1, 16])),
            ios18,
        ),
        "codebook_uint2_row_blocks_ios18": (
            lambda: _aten(_codebook(torch.uint2, 2, [8, -1])),
            ios18,
        ),
        "intx_int4_per_group_ios18": (
            lambda: _aten(
                _torchao(IntxWeightOnlyConfig(weight_dtype=torch.int4, granularity=PerGroup(16)))
            ),
            ios18,
        ),
        "intx_int8_per_channel_ios18": (
            lambda: _aten(
                _torchao(IntxWeightOnlyConfig(weight_dtype=torch.int8, granularity=PerAxis(0)))
            ),
            ios18,
        ),
        "intx_int8_per_channel_ios16": (
            lambda: _aten(
                _torchao(IntxWeightOnlyConfig(weight_dtype=torch.int8, granularity=PerAxis(0)))
            ),
            ios16,
        ),
        "edge_layout_ops_ios18": (lambda: _edge(LayoutOps(), (torch.randn(3, 4),)), ios18),
        "edge_codebook_uint4_ios18": (
            lambda: _edge(_codebook(torch.uint4, 4, [-1, -1]), (torch.arange(10).reshape(2, 5),)),
            ios18,
        ),
    }
    if "--zoo" in sys.argv:
        from lowerkit.zoo import get as zoo_model

        tiny_lm = zoo_model("tiny_lm")
        cases["edge_zoo_tiny_lm_ios18"] = (
            lambda: _edge(tiny_lm.module(), tiny_lm.example_inputs()),
            ios18,
        )
    cases.update(
        {
            "lowerkit_only_codebook_uint1_per_tensor_ios16": (
                lambda: _aten(_codebook(torch.uint1, 1, [-1, -1])),
                ios16,
            ),
            "lowerkit_only_codebook_uint4_per_tensor_ios16": (
                lambda: _aten(_codebook(torch.uint4, 4, [-1, -1])),
                ios16,
            ),
            "lowerkit_only_codebook_uint5_per_tensor_ios18": (
                lambda: _aten(_codebook(torch.uint5, 5, [-1, -1])),
                ios18,
            ),
            "lowerkit_only_int8_weight_only_ios18": (
                lambda: _aten(_torchao(Int8WeightOnlyConfig())),
                ios18,
            ),
            "lowerkit_only_edge_int8_weight_only_ios18": (
                lambda: _edge(_torchao(Int8WeightOnlyConfig()), (torch.arange(10).reshape(2, 5),)),
                ios18,
            ),
        }
    )
    return cases


def _describe(mlmodel: Any) -> str:
    text = re.sub(r"block\d+", "block", str(mlmodel._mil_program))
    digest = hashlib.sha256()
    for function in mlmodel._mil_program.functions.values():
        for op in function.operations:
            if op.op_type == "const":
                value = np.asarray(op.outputs[0].val)
                digest.update(f"{value.dtype}:{value.shape}".encode())
                digest.update(value.tobytes() if value.dtype != object else repr(value).encode())
    return f"{text}\nconst digest {digest.hexdigest()}"


def _setup(mode: str) -> dict[str, Any]:
    import importlib

    info: dict[str, Any] = {}
    steps = {
        "executorch": ["executorch"],
        "lowerkit": ["lowerkit"],
        "lowerkit_then_executorch": ["lowerkit", "executorch"],
        "executorch_then_lowerkit": ["executorch", "lowerkit"],
    }[mode]
    for step in steps:
        if step == "executorch":
            importlib.import_module(ET_TORCH_OPS)
        else:
            from lowerkit.coreml_compiler_ops import register

            register()
            register()  # idempotent
    if "lowerkit" in steps:
        from lowerkit.coreml_compiler_ops import displaced_translation, is_registered

        info["is_registered"] = is_registered()
        shadowed = displaced_translation("quant.dequantize_codebook")
        info["displaced_codebook_module"] = None if shadowed is None else shadowed.__module__
    info["lowerkit_imported"] = "lowerkit.coreml_compiler_ops" in sys.modules
    info["executorch_translations_imported"] = ET_TORCH_OPS in sys.modules
    return info


def main() -> None:
    mode = sys.argv[1]
    torch.manual_seed(0)
    report: dict[str, Any] = {"setup": _setup(mode), "cases": {}}
    for name, (build, target) in _cases().items():
        try:
            mlmodel = ct.convert(
                build(),
                source="pytorch",
                convert_to="mlprogram",
                minimum_deployment_target=target,
                skip_model_load=True,
            )
            report["cases"][name] = _describe(mlmodel)
        except Exception as error:
            report["cases"][name] = (
                f"ERROR {type(error).__name__}: {str(error).splitlines()[0] if str(error) else ''}"
            )
    print("PARITY-JSON " + json.dumps(report))


if __name__ == "__main__":
    main()
