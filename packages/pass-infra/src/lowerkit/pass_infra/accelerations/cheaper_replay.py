"""cheaper_replay: every ExportPass replays without the work stock throws away."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

from torch.fx import GraphModule

from lowerkit.pass_infra.accelerations.replay_engine import CHEAP_REPLAY, ReplayOptions, vouch_graph
from lowerkit.pass_infra.accelerations.versions import PROVEN_ON, proven_scope

__all__ = ["cheaper_replay", "vouch_for"]


@contextmanager
def cheaper_replay(*, reuse_values: bool = True, lazy_recompile: bool = True) -> Iterator[None]:
    """Within the block every ExportPass replays without work whose result is discarded or known.

    - the provenance chain (``meta["from_node"]``) is shared, not deep-copied;
    - ``node_debug_str`` is formatted only when read;
    - with `reuse_values`, a node that ``call_operator`` re-creates with the same op and
      the very same input values takes its recorded ``meta["val"]`` instead of a new
      FakeTensor dispatch (never for mutating ops or symbolic shapes), if that value is
      vouched for: the node was made by an earlier replay (or is in a graph passed to
      `vouch_for`) and its target, args, kwargs and val are unchanged since;
    - with `lazy_recompile`, a replayed graph module is a ``_LazyGraphModule``: its Python
      code is generated when first used (``.code``, calling it), not after every pass.
    - plain arguments (proxies, scalars, dtypes, and tuples / lists / dicts of them) are
      unwrapped and handed to the tracer directly, not through pytree and the tracer's five
      ``create_arg`` layers; a replay whose graph inputs all have static shapes skips the
      symbolic-input snapshots, which would find nothing to check.

    The resulting graphs and node metadata equal the stock replay's. Applies to every
    ExportPass (lowerkit's or upstream's, overriding call() or not) replayed by the thread
    inside the block; other threads replay the stock way. The block holds the process-wide
    lowering lock; scopes nest (reference-counted); restored when the last one exits. On
    torch / ExecuTorch versions other than ``PROVEN_ON`` it replays the stock way, with an
    ``UnprovenVersionWarning``.
    """
    options = ReplayOptions(reuse_values, lazy_recompile)
    with proven_scope("lowerkit-pass-infra", PROVEN_ON, "cheaper_replay", CHEAP_REPLAY.scope(options)):
        yield


def vouch_for(graph_module: GraphModule) -> None:
    """Declare every node's meta["val"] in `graph_module` consistent, so replays may reuse them.

    PassPipeline does this for its input graph; nodes that passes create or edit in
    place afterwards are not vouched for until a replay re-creates them.
    """
    vouch_graph(graph_module)
