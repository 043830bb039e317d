"""Shared helpers for pass-infra's cross-package sameness tests."""

from __future__ import annotations

import copy
import re
from typing import Any

import pytest
import torch
from torch.fx import GraphModule

_ADDRESS = re.compile(r" at 0x[0-9a-f]+")
#: torch.fx's generated-code file name: numbered by a process-wide counter of compiled graph
#: modules, so it differs between two stock runs of one program (a nested graph's stack traces).
_GENERATED_FILE = re.compile(r"<eval_with_key>\.\d+")


def _strip_graph_ids(source: Any) -> Any:
    data = source.to_dict()

    def strip(d: dict[str, Any]) -> dict[str, Any]:
        return {
            **{k: v for k, v in d.items() if k not in ("graph_id", "from_node")},
            "from_node": [strip(x) for x in d["from_node"]],
        }

    return strip(data)


def _val_signature(value: Any) -> Any:
    if isinstance(value, torch.Tensor):
        return (tuple(value.shape), value.dtype, tuple(value.stride()), str(value.device))
    if isinstance(value, (list, tuple)):
        return tuple(_val_signature(v) for v in value)
    return repr(value)


def provenance_root(sources: list[Any]) -> Any:
    """The oldest ancestor of a from_node chain, graph id aside (what ExecuTorch's debug handles use)."""
    if not sources:
        return None
    source = sources[-1]
    while source.from_node:
        source = source.from_node[-1]
    return {k: v for k, v in _strip_graph_ids(source).items() if k != "from_node"}


def meta_mismatches(stock: GraphModule, ours: GraphModule, *, provenance_roots_only: bool = False) -> list[str]:
    """Node-meta differences: same keys in the same order, val by shape/dtype/stride,
    provenance by content (graph ids aside: the two runs had different input copies; with
    `provenance_roots_only`, by the chains' roots), seq_nr by presence, stack traces with
    torch.fx's generated-code file numbers aside, quantization
    annotations by repr, every other key by ==.
    Nested graph modules included."""
    out: list[str] = []
    pairs = [(stock, ours)]
    stock_children = [m for m in stock.modules() if isinstance(m, GraphModule)][1:]
    our_children = [m for m in ours.modules() if isinstance(m, GraphModule)][1:]
    if len(stock_children) != len(our_children):
        return [f"{len(stock_children)} nested graphs vs {len(our_children)}"]
    pairs += list(zip(stock_children, our_children, strict=True))
    for a_gm, b_gm in pairs:
        nodes_a, nodes_b = list(a_gm.graph.nodes), list(b_gm.graph.nodes)
        if len(nodes_a) != len(nodes_b):
            out.append(f"{len(nodes_a)} nodes vs {len(nodes_b)}")
            continue
        for a, b in zip(nodes_a, nodes_b, strict=True):
            if list(a.meta) != list(b.meta):
                out.append(f"{a.name}: keys {list(a.meta)} vs {list(b.meta)}")
                continue
            for key in a.meta:
                va, vb = a.meta[key], b.meta[key]
                if key == "val":
                    same = _val_signature(va) == _val_signature(vb)
                elif key == "from_node" and provenance_roots_only:
                    same = provenance_root(va) == provenance_root(vb)
                elif key == "from_node":
                    same = [_strip_graph_ids(s) for s in va] == [_strip_graph_ids(s) for s in vb]
                elif key == "seq_nr":
                    # Stock gives a node made without a seq_nr one from torch's
                    # process-global autograd sequence counter (fx.proxy._get_seq_nr):
                    # it differs between two stock runs as well; only presence is stable.
                    same = type(va) is type(vb)
                elif key == "stack_trace" and isinstance(va, str) and isinstance(vb, str):
                    same = _GENERATED_FILE.sub("<eval_with_key>", va) == _GENERATED_FILE.sub("<eval_with_key>", vb)
                elif key == "eager_input_vals":
                    same = _val_signature(va) == _val_signature(vb)
                elif key == "quantization_annotation":
                    # Keyed by the nodes of its own graph (== is identity there): by repr, which
                    # names them (the quantizer's closures' addresses aside).
                    same = _ADDRESS.sub("", repr(va)) == _ADDRESS.sub("", repr(vb))
                else:
                    try:
                        same = bool(va == vb)
                    except Exception:  # e.g. tensors: compare their signature
                        same = _val_signature(va) == _val_signature(vb)
                if not same:
                    out.append(f"{a.name}: {key}: {va!r} vs {vb!r}")
    return out


def copies(graph_module: GraphModule, count: int) -> list[GraphModule]:
    """Independent deep copies (passes may edit their input in place)."""
    return [copy.deepcopy(graph_module) for _ in range(count)]


@pytest.fixture
def fake_kernel_runs(monkeypatch: pytest.MonkeyPatch) -> list[Any]:
    """The lowered modules whose original program ExecuTorch's fake kernel for a delegate call
    unlifts (``.module()``): one entry per kernel run."""
    runs: list[Any] = []
    stock = torch.export.ExportedProgram.module

    def counting(self: Any, *args: Any, **kwargs: Any) -> Any:
        runs.append(self)
        return stock(self, *args, **kwargs)

    monkeypatch.setattr(torch.export.ExportedProgram, "module", counting)
    return runs
