"""The local ``run_decompositions`` against torch's whole re-trace, over the classes of program
where the two can part: multi-output ops that decompose, calls that return nothing, and the
attention blocks real models are written with.

Each case is exported, then decomposed the way ``to_edge_transform_and_lower`` does it for a
partitioner: ``run_decompositions({})``, then ExecuTorch's default table without the ops the
partitioner keeps (ExecuTorch's own ``TOSAPartitioner`` and ``CoreMLPartitioner``, asked on the
program itself); a further call on a decomposed program is test_retrace_skip.py's. Every call runs
both ways on the same input, in this process: pass-infra's (inside ``RETRACE_SKIP``) and torch's
(``ExportedProgram.run_decompositions`` unpatched). The two programs must be equal in graph code,
node names and order, every node's metadata (provenance by its roots, from which ExecuTorch
derives debug handles), signature, module call graph and weights. The next call takes torch's
result, as a lowering chains them.

Where the local decomposition takes torch's re-trace instead, the case says why
(`FALLS_BACK`): a guard that only ever ran torch's code would prove nothing.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, TypeAlias

import pytest
import torch
import torch.nn.functional as F
from executorch.exir.program._program import _default_decomposition_table

from lowerkit.pass_infra import _upstream
from lowerkit.pass_infra.accelerations.retrace_skip import RETRACE_SKIP, decomposition_fallbacks
from pass_infra.test_retrace_skip import _assert_same

Outputs: TypeAlias = tuple[torch.Tensor, ...] | torch.Tensor
aten = torch.ops.aten

#: Multi-output ops a lowering's tables decompose or keep, as models call them on a (2, 6, 12) tensor.
MULTI_OUTPUT: dict[str, Callable[[torch.Tensor], tuple[torch.Tensor, ...]]] = {
    "unbind": lambda x: x.unbind(0),
    "unbind_last": lambda x: x[..., :3].unbind(-1),
    "chunk": lambda x: x.chunk(3, dim=-1),
    "split": lambda x: x.split(4, dim=-1),
    "split_uneven": lambda x: x.split(5, dim=-1),
    "split_with_sizes": lambda x: x.split([2, 4, 6], dim=-1),
    "tensor_split": lambda x: x.tensor_split(3, dim=-1),
    "unsafe_split": lambda x: tuple(aten.unsafe_split.Tensor(x, 4, -1)),
    "unsafe_chunk": lambda x: tuple(torch.unsafe_chunk(x, 3, -1)),
    "var_mean": lambda x: torch.var_mean(x, dim=-1, keepdim=True),
    "std_mean": lambda x: torch.std_mean(x, dim=-1, keepdim=True),
    "aminmax": lambda x: tuple(torch.aminmax(x, dim=-1)),
    "max_dim": lambda x: tuple(x.max(dim=-1)),
    "min_dim": lambda x: tuple(x.min(dim=1)),
    "topk": lambda x: tuple(x.topk(3, dim=-1)),
    "sort": lambda x: tuple(x.sort(dim=-1)),
    "layer_norm": lambda x: tuple(aten.native_layer_norm.default(x, [12], None, None, 1e-5)),
    "batch_norm": lambda x: tuple(
        aten._native_batch_norm_legit_no_training.default(x, None, None, torch.zeros(6), torch.ones(6), 0.1, 1e-5)
    ),
    "max_pool_indices": lambda x: tuple(F.max_pool2d(x.unsqueeze(1), 2, return_indices=True)),
}


def _float(value: torch.Tensor) -> torch.Tensor:
    return value if value.is_floating_point() else value.float()


#: How a model uses a multi-output op's results.
USES: dict[str, Callable[[tuple[torch.Tensor, ...]], Outputs]] = {
    "all": lambda outs: tuple(_float(o) * 2 for o in outs),
    "first": lambda outs: _float(outs[0]) + 1,  # the others unused
    "last": lambda outs: _float(outs[-1]) + 1,
    "returned": lambda outs: outs,  # the program's outputs are the getitems themselves
}


class _Apply(torch.nn.Module):
    """A linear layer, then `body` (a weight, as in a model; the op's input is an intermediate)."""

    def __init__(self, body: Callable[[torch.Tensor], Outputs]) -> None:
        super().__init__()
        self.linear = torch.nn.Linear(12, 12)
        self.body = body

    def forward(self, x: torch.Tensor) -> Outputs:
        return self.body(self.linear(x))


def _chained(x: torch.Tensor) -> Outputs:
    """Multi-output ops feeding each other: qkv's unbind, a max over one output, a split of another."""
    q, k, v = x.reshape(2, 6, 3, 4).permute(2, 0, 1, 3).unbind(0)
    values, _ = k.max(dim=-1)
    left, right = v.split(2, dim=-1)
    mean, _ = torch.var_mean(left, dim=-1, keepdim=True)[::-1]
    return q * values.unsqueeze(-1) + torch.cat((left, right), -1) * mean


def _casts(x: torch.Tensor) -> Outputs:
    """``.to(dtype)`` casts, which export guards with ``_assert_tensor_metadata`` (returns nothing)."""
    weights = torch.softmax(x.to(torch.float32), dim=-1, dtype=torch.float32).to(x.dtype)
    return (weights.type_as(x) * x).to(torch.float16).to(torch.float32)


def _assert_async(x: torch.Tensor) -> Outputs:
    torch._assert_async(x.abs().sum() >= 0)
    return x.relu()


def _assert_scalar(x: torch.Tensor) -> Outputs:
    """``torch._check`` on a data-dependent scalar: export records ``_assert_scalar`` (a symbol)."""
    count = (x > 0).sum().item()
    torch._check(count >= 0)
    return x * count


class _Attention(torch.nn.Module):
    """Self-attention over (2, 6, 12), 3 heads of 4, in the ways real models write it."""

    def __init__(self, style: str) -> None:
        super().__init__()
        self.style = style
        self.qkv = torch.nn.Linear(12, 36)
        self.q, self.k, self.v = (torch.nn.Linear(12, 12) for _ in range(3))
        self.proj = torch.nn.Linear(12, 12)

    def _heads(self, t: torch.Tensor) -> torch.Tensor:
        return t.view(2, 6, 3, 4).transpose(1, 2)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if self.style == "timm":  # timm's Attention: qkv.unbind(0), then SDPA
            q, k, v = self.qkv(x).reshape(2, 6, 3, 3, 4).permute(2, 0, 3, 1, 4).unbind(0)
            out = F.scaled_dot_product_attention(q, k, v)
        elif self.style == "chunk":  # one qkv projection chunked on the last dim (GPT-NeoX, MobileViT)
            q, k, v = (self._heads(t) for t in self.qkv(x).chunk(3, dim=-1))
            out = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        elif self.style == "split":  # GPT-2's c_attn(x).split(embed, dim=2), eager
            q, k, v = (self._heads(t) for t in self.qkv(x).split(12, dim=2))
            scores = torch.matmul(q, k.transpose(-1, -2)) / 2.0
            out = torch.matmul(scores.softmax(-1), v)
        elif self.style == "hf_eager":  # transformers' eager_attention_forward
            q, k, v = self._heads(self.q(x)), self._heads(self.k(x)), self._heads(self.v(x))
            scores = torch.matmul(q, k.transpose(2, 3)) * 0.5
            weights = F.softmax(scores, dim=-1, dtype=torch.float32).to(q.dtype)
            out = torch.matmul(F.dropout(weights, p=0.0, training=False), v)
        elif self.style == "hf_sdpa":  # transformers' sdpa_attention_forward, with a mask
            q, k, v = self._heads(self.q(x)), self._heads(self.k(x)), self._heads(self.v(x))
            mask = torch.ones(6, 6, dtype=torch.bool).tril()
            out = F.scaled_dot_product_attention(q.contiguous(), k.contiguous(), v.contiguous(), attn_mask=mask)
        else:  # ExecuTorch's Llama: rotary embedding through reshape(..., -1, 2).unbind(-1), then SDPA
            q, k, v = self._heads(self.q(x)), self._heads(self.k(x)), self._heads(self.v(x))
            cos, sin = torch.ones(6, 2), torch.zeros(6, 2)
            q_r, q_i = q.float().reshape(*q.shape[:-1], -1, 2).unbind(-1)
            k_r, k_i = k.float().reshape(*k.shape[:-1], -1, 2).unbind(-1)
            q = torch.stack([q_r * cos - q_i * sin, q_r * sin + q_i * cos], dim=-1).flatten(3)
            k = torch.stack([k_r * cos - k_i * sin, k_r * sin + k_i * cos], dim=-1).flatten(3)
            out = F.scaled_dot_product_attention(q.type_as(v), k.type_as(v), v, is_causal=True)
        return self.proj(out.transpose(1, 2).reshape(2, 6, 12))


ATTENTION = ("timm", "chunk", "split", "hf_eager", "hf_sdpa", "llama_rope")


class _Cache(torch.nn.Module):
    """Buffers written in place, as ExecuTorch's Llama keeps its KV cache: the functional program
    returns their new values (buffer mutations in its signature)."""

    def __init__(self, style: str) -> None:
        super().__init__()
        self.style = style
        self.linear = torch.nn.Linear(12, 12)
        self.register_buffer("k_cache", torch.zeros(2, 8, 12))
        self.register_buffer("v_cache", torch.zeros(2, 8, 12))
        self.register_buffer("steps", torch.zeros(()))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = self.linear(x)
        if self.style == "llama":  # ExecuTorch's KVCache.update: k_out[:, :, input_pos] = k_val
            k, v = y.split(6, dim=-1)  # a decomposing op writes the cache
            self.k_cache[:, torch.arange(6)] = y
            self.v_cache[:, torch.arange(2, 8)] = torch.cat((v, k), -1)
        elif self.style == "index_put":  # into a slice of the cache
            position = torch.arange(6)
            k, v = y.split(6, dim=-1)  # a decomposing op writes the cache
            self.k_cache[:, position, :6] = k
            self.v_cache[:, position, 6:] = v
        elif self.style == "copy":  # a slice of the cache overwritten by a decomposing op's output
            self.k_cache[:, :6].copy_(F.layer_norm(y, [12]))
        else:  # a counter bumped in place, read after
            self.steps.add_(1)
        # read as Llama reads its cache (repeat_interleave for grouped-query attention), not through a view
        k_cache, v_cache = self.k_cache.repeat_interleave(1, 0), self.v_cache.repeat_interleave(1, 0)
        return torch.bmm(y, k_cache.transpose(1, 2)).sum(-1, keepdim=True) + v_cache[:, :6] * self.steps


CACHES = ("llama", "index_put", "copy", "counter")


def _applying(body: Callable[[torch.Tensor], Outputs]) -> Callable[[], torch.nn.Module]:
    return lambda: _Apply(body)


def _using(call: Callable[[torch.Tensor], tuple[torch.Tensor, ...]], use: Callable[[tuple[torch.Tensor, ...]], Outputs]) -> Callable[[], torch.nn.Module]:
    return _applying(lambda x: use(call(x)))


def _attending(style: str) -> Callable[[], torch.nn.Module]:
    return lambda: _Attention(style)


def _caching(style: str) -> Callable[[], torch.nn.Module]:
    return lambda: _Cache(style)


def _cases() -> dict[str, Callable[[], torch.nn.Module]]:
    cases = {f"{op}-{use}": _using(call, consume) for op, call in MULTI_OUTPUT.items() for use, consume in USES.items()}
    cases["chained"] = _applying(_chained)
    cases.update({"casts": _applying(_casts), "assert_async": _applying(_assert_async), "assert_scalar": _applying(_assert_scalar)})
    cases.update({f"attention-{style}": _attending(style) for style in ATTENTION})
    cases.update({f"cache-{style}": _caching(style) for style in CACHES})
    return cases


CASES = _cases()

#: Cases whose every run_decompositions takes torch's whole re-trace, and why.
FALLS_BACK = {"assert_scalar": "symbolic shapes"}
#: Cases whose first run_decompositions (functionalizing in-place writes to buffers) takes
#: torch's re-trace, and why; the functional program's later ones stay local.
FIRST_FALLS_BACK = {
    "cache-index_put": "aten.index_put_.default mutates a view (slice_1)",
    "cache-copy": "aten.copy_.default mutates a view (slice_1)",
}


def _partitioner_tables(program: torch.export.ExportedProgram) -> dict[str, dict[Any, Any]]:
    """ExecuTorch's default table without the ops each partitioner keeps on `program`."""
    from executorch.backends.apple.coreml.partition import CoreMLPartitioner
    from executorch.backends.arm.tosa.compile_spec import TosaCompileSpec
    from executorch.backends.arm.tosa.partitioner import TOSAPartitioner

    partitioners = {"arm": TOSAPartitioner(TosaCompileSpec("TOSA-1.0+INT")), "coreml": CoreMLPartitioner()}
    tables = {}
    for name, partitioner in partitioners.items():
        table = _default_decomposition_table()
        for op in partitioner.ops_to_not_decompose(program)[0]:
            table.pop(op, None)
        tables[name] = table
    return tables


def _both_ways(program: torch.export.ExportedProgram, table: dict[Any, Any]) -> tuple[torch.export.ExportedProgram, list[str]]:
    """torch's ``program.run_decompositions(table)``, asserted equal to pass-infra's; (it, fallbacks)."""
    with RETRACE_SKIP.scope(), decomposition_fallbacks() as fallbacks:
        local = program.run_decompositions(dict(table))
    stock = _upstream.STOCK_RUN_DECOMPOSITIONS(program, dict(table))
    _assert_same(stock, local)
    return stock, [fallback.reason for fallback in fallbacks]


@pytest.mark.parametrize("name", list(CASES))
def test_local_decomposition_gives_torchs_retrace(name: str) -> None:
    torch.manual_seed(0)
    program = torch.export.export(CASES[name]().eval(), (torch.randn(2, 6, 12),))
    first, reasons = _both_ways(program, {})
    falls_back = FALLS_BACK.get(name) or FIRST_FALLS_BACK.get(name)
    assert reasons == ([falls_back] if falls_back else [])
    for backend, table in _partitioner_tables(first).items():
        _, reasons = _both_ways(first, table)
        if name not in FALLS_BACK:
            assert reasons == [], backend
    if name.startswith("cache-") and name not in FIRST_FALLS_BACK:
        # ExecuTorch's LLM export re-exports the module the first export gives: it writes the
        # new cache values back with copy_, which the next run_decompositions({}) functionalizes.
        again = torch.export.export(first.module(), (torch.randn(2, 6, 12),), strict=True)
        _, reasons = _both_ways(again, {})
        assert reasons == []


def test_the_guard_sees_a_misplaced_decomposition(monkeypatch: pytest.MonkeyPatch) -> None:
    """The comparison catches the bug this file guards against: a multi-output decomposition's
    nodes interleaved per output (slice, squeeze, slice, squeeze ...) where a trace records them
    in the decomposition's order."""
    from lowerkit.pass_infra.accelerations import local_decomposition

    splice = local_decomposition._splice

    def per_output(graph: torch.fx.Graph, decomposed: Any, outside: Any, slots: Any) -> Any:
        spliced, replaced, moved = splice(graph, decomposed, outside, slots)
        squeezes = [n for n in graph.nodes if n in spliced and n.target == aten.squeeze.dims]
        for node in squeezes:
            node.args[0].append(node)  # each squeeze right after its slice
        return spliced, replaced, moved

    monkeypatch.setattr(local_decomposition, "_splice", per_output)
    program = torch.export.export(CASES["unbind-all"]().eval(), (torch.randn(2, 6, 12),))
    first, _ = _both_ways(program, {})
    with pytest.raises(AssertionError):
        _both_ways(first, _default_decomposition_table())


class _ReadsANewLayout(torch.nn.Module):
    """SDPA (decomposed by the Arm table into a transposed result), a view of it, then an unbind
    (decomposed too) of that view: the unbind's small re-trace saw the view's old strides."""

    def forward(self, x: torch.Tensor) -> tuple[torch.Tensor, ...]:
        q = x.view(2, 6, 3, 4).transpose(1, 2)
        return F.scaled_dot_product_attention(q, q, q).permute(0, 2, 1, 3).unbind(1)


def test_a_decomposition_reading_a_value_laid_out_anew_takes_the_stock_retrace() -> None:
    program = _upstream.STOCK_RUN_DECOMPOSITIONS(torch.export.export(_ReadsANewLayout(), (torch.randn(2, 6, 12),)), {})
    _, reasons = _both_ways(program, _partitioner_tables(program)["arm"])
    assert len(reasons) == 1 and "before a decomposition laid it out anew" in reasons[0], reasons


class _MetOutOfOrder(torch.nn.Module):
    """Weights a strict (dynamo) export meets out of module order, as ExecuTorch's Llama meets its
    rotary tables (registered last, read first): torch's re-trace lists them in module order."""

    def __init__(self) -> None:
        super().__init__()
        self.layer = _Cache("llama")
        self.rope = torch.nn.Module()
        self.rope.register_buffer("table", torch.ones(12))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.layer(x * self.rope.table)


def test_weights_met_out_of_module_order_get_the_retraces_order() -> None:
    program = torch.export.export(_MetOutOfOrder(), (torch.randn(2, 6, 12),), strict=True)
    buffers = list(program.graph_signature.buffers)
    assert buffers[0] == "rope.table", buffers  # the case this guards: dynamo's order
    first, reasons = _both_ways(program, {})
    assert reasons == []
    assert list(first.graph_signature.buffers)[-1] == "rope.table"
