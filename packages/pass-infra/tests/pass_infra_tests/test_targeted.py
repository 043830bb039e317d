"""TargetedPass: should_run (nested graphs), fast-copy equals the stock replay, fallbacks."""

from __future__ import annotations

import pytest
import torch
from executorch.exir.dialects._ops import ops as exir_ops
from executorch.exir.pass_base import ExportPass
from torch.fx.passes.infra.pass_base import PassResult

from lowerkit.pass_infra import (
    PassInfraError,
    TargetedPass,
    as_targeted,
    fast_copy_enabled,
    first_difference,
    should_run,
)
from pass_infra_tests.conftest import build_chain, meta_differences, run_stock

E = exir_ops.edge.aten
A = torch.ops.aten


class StockReluToClamp(ExportPass):
    """The reference: an ordinary ExportPass."""

    def call_operator(self, op, args, kwargs, meta):
        if op == E.relu.default:
            return super().call_operator(E.clamp.default, (args[0], 0.0), {}, meta)
        return super().call_operator(op, args, kwargs, meta)


class ReluToClamp(TargetedPass):
    targeted_ops = (E.relu.default,)

    def call_operator(self, op, args, kwargs, meta):
        if op == E.relu.default:
            return super().call_operator(E.clamp.default, (args[0], 0.0), {}, meta)
        return super().call_operator(op, args, kwargs, meta)


class ReluToClampOverridingCall(ReluToClamp):
    def call(self, graph_module):
        return super().call(graph_module)


class ReluToClampOverridingCallSafe(ReluToClampOverridingCall):
    fast_copy_safe = True


class SigmoidPass(TargetedPass):
    targeted_ops = (A.sigmoid.default,)


class TanhPacketPass(TargetedPass):
    targeted_ops = (A.tanh,)  # a packet: every overload


class ExpPass(TargetedPass):
    targeted_ops = (A.exp.default,)


class RecordingPass(TargetedPass):
    targeted_ops = (E.relu.default,)

    def __init__(self) -> None:
        super().__init__()
        self.seen: list[object] = []

    def call_operator(self, op, args, kwargs, meta):
        self.seen.append(op)
        return super().call_operator(op, args, kwargs, meta)


def test_should_run_false_without_targets_and_returns_graph_untouched():
    gm = build_chain(8, steps=((E.mul.Tensor, ("x",)), (E.add.Tensor, ("x",))))
    p = ReluToClamp()
    assert not p.should_run(gm)
    result = p(gm)
    assert result.graph_module is gm
    assert result.modified is False


def test_should_run_true_with_target():
    gm = build_chain(8)
    assert ReluToClamp().should_run(gm)


def test_should_run_sees_ops_inside_cond_branches(cond_graph):
    top_level = {n.target for n in cond_graph.graph.nodes if n.op == "call_function"}
    assert A.sigmoid.default not in top_level and A.tanh.default not in top_level
    assert SigmoidPass().should_run(cond_graph)
    assert TanhPacketPass().should_run(cond_graph)
    assert not ExpPass().should_run(cond_graph)


def test_edge_and_aten_overloads_match_each_other():
    gm = build_chain(4)  # edge ops

    class AtenRelu(TargetedPass):
        targeted_ops = (A.relu.default,)

    assert AtenRelu().should_run(gm)


def test_untargeted_pass_always_runs_and_never_fast_copies():
    class Untargeted(TargetedPass):
        pass

    gm = build_chain(4, steps=((E.mul.Tensor, ("x",)),))
    assert Untargeted().should_run(gm)
    assert should_run(StockReluToClamp(), gm)
    assert not fast_copy_enabled(Untargeted())


@pytest.mark.parametrize("seq_nr", [True, False])  # direct copy / via tracer.create_node
def test_fast_copy_gives_the_stock_graph_and_metadata(seq_nr):
    gm = build_chain(40, provenance_depth=3, seq_nr=seq_nr)
    stock = run_stock(StockReluToClamp(), gm)
    fast = run_stock(ReluToClamp(), gm)
    assert fast.code == stock.code
    assert first_difference(stock, fast) is None
    assert meta_differences(stock, fast) == []


@pytest.mark.parametrize("seq_nr", [True, False])
def test_fast_copy_without_provenance_gives_stock_metadata(seq_nr):
    # Nodes without "from_node": the replay's fresh NodeSource is what survives.
    gm = build_chain(12, provenance_depth=0, seq_nr=seq_nr)
    stock = run_stock(StockReluToClamp(), gm)
    fast = run_stock(ReluToClamp(), gm)
    assert fast.code == stock.code
    assert meta_differences(stock, fast) == []
    assert all("from_node" in n.meta for n in fast.graph.nodes if n.op == "call_function")


def test_untargeted_nodes_are_copied_not_redispatched():
    gm = build_chain(8)
    old_vals = {n.name: n.meta["val"] for n in gm.graph.nodes if n.op == "call_function"}
    p = RecordingPass()
    fast = p(gm).graph_module
    # call_operator saw only the targeted op; copied nodes keep their FakeTensor object,
    # where the stock replay dispatches a new one.
    assert set(p.seen) == {E.relu.default}
    stock = run_stock(StockReluToClamp(), gm)
    for out, reused in ((fast, True), (stock, False)):
        mul = next(n for n in out.graph.nodes if n.target == E.mul.Tensor)
        assert (mul.meta["val"] is old_vals[mul.name]) is reused


def test_node_without_val_falls_back_to_full_dispatch():
    gm = build_chain(8)
    victim = next(n for n in gm.graph.nodes if n.target == E.mul.Tensor)
    del victim.meta["val"]
    p = RecordingPass()
    out = p(gm).graph_module
    assert E.mul.Tensor in p.seen
    copied = next(n for n in out.graph.nodes if n.name == victim.name)
    assert isinstance(copied.meta["val"], torch.Tensor)


def test_changed_input_metadata_makes_consumers_redispatch():
    class ReluToDouble(TargetedPass):
        targeted_ops = (E.relu.default,)

        def call_operator(self, op, args, kwargs, meta):
            if op == E.relu.default:
                return super().call_operator(
                    E._to_copy.default, (args[0],), {"dtype": torch.float64}, meta
                )
            return super().call_operator(op, args, kwargs, meta)

    class StockReluToDouble(ExportPass):
        def call_operator(self, op, args, kwargs, meta):
            if op == E.relu.default:
                return super().call_operator(
                    E._to_copy.default, (args[0],), {"dtype": torch.float64}, meta
                )
            return super().call_operator(op, args, kwargs, meta)

    gm = build_chain(8)
    stock = run_stock(StockReluToDouble(), gm)
    fast = run_stock(ReluToDouble(), gm)
    assert first_difference(stock, fast) is None
    assert meta_differences(stock, fast) == []
    last = [n for n in fast.graph.nodes if n.op == "call_function"][-1]
    assert last.meta["val"].dtype == torch.float64


def test_overriding_call_disables_fast_copy_unless_declared_safe():
    assert fast_copy_enabled(ReluToClamp())
    assert not fast_copy_enabled(ReluToClampOverridingCall())
    assert fast_copy_enabled(ReluToClampOverridingCallSafe())
    gm = build_chain(12)
    stock = run_stock(StockReluToClamp(), gm)
    for p in (ReluToClampOverridingCall(), ReluToClampOverridingCallSafe()):
        out = run_stock(p, gm)
        assert out.code == stock.code
        assert meta_differences(stock, out) == []


def test_targeted_pass_through_cond_matches_stock(cond_graph):
    class StockSigmoidToTanh(ExportPass):
        def call_operator(self, op, args, kwargs, meta):
            if op == A.sigmoid.default:
                op = A.tanh.default
            return super().call_operator(op, args, kwargs, meta)

    class SigmoidToTanh(TargetedPass):
        targeted_ops = (A.sigmoid.default,)

        def call_operator(self, op, args, kwargs, meta):
            if op == A.sigmoid.default:
                op = A.tanh.default
            return super().call_operator(op, args, kwargs, meta)

    stock = run_stock(StockSigmoidToTanh(), cond_graph)
    fast = run_stock(SigmoidToTanh(), cond_graph)
    assert first_difference(stock, fast) is None
    assert fast.code == stock.code
    nested = [m for m in fast.children() if isinstance(m, torch.fx.GraphModule)]
    stock_nested = [m for m in stock.children() if isinstance(m, torch.fx.GraphModule)]
    assert len(nested) == 2 and [m.code for m in nested] == [m.code for m in stock_nested]
    assert all(n.target != A.sigmoid.default for m in nested for n in m.graph.nodes)


def test_as_targeted_wraps_an_existing_pass_keeping_name_and_type():
    class Upstream(ExportPass):
        target_ops = (E.relu.default,)

        def call_operator(self, op, args, kwargs, meta):
            if op == E.relu.default:
                return super().call_operator(E.clamp.default, (args[0], 0.0), {}, meta)
            return super().call_operator(op, args, kwargs, meta)

    original = Upstream()
    fast = as_targeted(original)
    assert type(fast).__name__ == "Upstream" and isinstance(fast, Upstream)
    assert type(original) is Upstream
    assert fast_copy_enabled(fast) and not fast_copy_enabled(original)
    gm = build_chain(12)
    assert first_difference(run_stock(original, gm), run_stock(fast, gm)) is None
    assert not fast.should_run(build_chain(4, steps=((E.mul.Tensor, ("x",)),)))


def test_bad_targets_are_user_errors():
    class Bad(TargetedPass):
        targeted_ops = ("aten::relu",)

    with pytest.raises(PassInfraError, match="not an operator"):
        Bad().should_run(build_chain(2))
    with pytest.raises(PassInfraError, match="ExportPass instance"):
        as_targeted(lambda gm: PassResult(gm, False))


def test_reference_copy_keeps_the_operators_a_pass_holds():
    from lowerkit.pass_infra import reference_copy

    class HoldsTargets(ExportPass):
        def __init__(self) -> None:
            super().__init__()
            self.targets = frozenset({exir_ops.edge.aten.permute_copy.default})

    original = HoldsTargets()
    reference = reference_copy(original)
    assert reference is not original
    assert exir_ops.edge.aten.permute_copy.default in reference.targets


class _RegistryPass(ExportPass):
    """A pass whose subclasses each get their own registry (as ExecuTorch's AtenToDialectPass)."""

    registry: dict[str, str] = {}

    def __init_subclass__(cls, **kwargs):
        super().__init_subclass__(**kwargs)
        cls.registry = {}


class _FilledRegistryPass(_RegistryPass):
    pass


_FilledRegistryPass.registry["relu"] = "clamp"


def test_a_targeted_copy_keeps_the_class_state_its_init_subclass_would_reset():
    made = as_targeted(_FilledRegistryPass(), [E.relu.default])
    assert type(made) is not _FilledRegistryPass and made.registry == {"relu": "clamp"}


def test_a_copy_that_does_not_skip_runs_without_targets():
    gm = build_chain(8, steps=((E.mul.Tensor, ("x",)), (E.add.Tensor, ("x",))))
    assert not as_targeted(StockReluToClamp(), [E.relu.default]).should_run(gm)
    assert as_targeted(StockReluToClamp(), [E.relu.default], skip_without_targets=False).should_run(gm)
