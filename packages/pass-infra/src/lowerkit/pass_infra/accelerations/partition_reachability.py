"""torch's CapabilityBasedPartitioner gets its reachability from bitsets, read on demand.

``CapabilityBasedPartitioner.__init__`` (Arm's TOSA and Core ML's partitioners) builds a
``_DependencyViewer``: for every node, the set of all nodes downstream of it, each the union of
its users' sets. A graph of N nodes in a chain (a transformer) makes ~N²/2 set entries: 4.4 s
of DeiT-tiny's TOSA INT lowering (3,942 nodes), growing with the square of the model. The
partitioner asks for almost every node's set (``downstreams_of``) and only iterates it, for
membership tests and unions whose results do not depend on the order.

`PARTITION_REACHABILITY` builds the same relation as one int bitset per node (a union is one C
operation). ``downstreams_of`` hands out a read-only set view of a node's bitset, which yields
the same nodes as stock's set (in graph order) without building it. The viewer's
``downstreams`` mapping (stock's attribute) makes real sets when read.
"""

from __future__ import annotations

import collections
from collections.abc import Iterable, Iterator, Set
from typing import Any

import numpy as np
from torch.fx import GraphModule, Node

from lowerkit.pass_infra import _upstream
from lowerkit.pass_infra.accelerations.patching import Patch, Replacement

__all__ = ["PARTITION_REACHABILITY", "DownstreamSet", "Downstreams", "downstream_bitsets"]


class DownstreamSet(Set[Node]):
    """The nodes downstream of one node, read from its bitset (bit i: the graph's i-th node)."""

    __slots__ = ("_bitset", "_index", "_nodes")

    def __init__(self, bitset: int, nodes: list[Node], index: dict[Node, int]) -> None:
        self._bitset = bitset
        self._nodes = nodes
        self._index = index

    def __iter__(self) -> Iterator[Node]:
        return map(self._nodes.__getitem__, _positions(self._bitset))

    def __len__(self) -> int:
        return self._bitset.bit_count()

    def __contains__(self, node: object) -> bool:
        position = self._index.get(node)
        return position is not None and bool(self._bitset >> position & 1)

    @classmethod
    def _from_iterable(cls, nodes: Iterable[Node]) -> set[Node]:
        return set(nodes)  # what ``&``, ``|``, ``-`` of a view give: a plain set


class Downstreams(collections.defaultdict[Node, set[Node]]):
    """Stock's ``downstreams`` mapping (a ``defaultdict(set)``), each node's set made on first read.

    Reading a key (``[]``, ``get``, ``in``), iterating or sizing gives what stock's mapping
    gives; iterating first makes every set, in stock's key order. C-level readers of the dict
    itself (``dict(mapping)``, ``==``) see only the sets made so far.
    """

    def __init__(self, nodes: list[Node], index: dict[Node, int], bitsets: dict[Node, int]) -> None:
        super().__init__(set)
        self._nodes = nodes
        self._index = index  # node -> its position in `nodes`
        #: node -> bitset of its downstream nodes (bit i: ``nodes[i]``), in stock's key order.
        self._bitsets = bitsets
        self._all_made = False

    def __missing__(self, node: Node) -> set[Node]:
        bitset = self._bitsets.get(node)
        members = set() if bitset is None else _members(bitset, self._nodes)
        self[node] = members
        return members

    def view(self, node: Node) -> Set[Node]:
        """What ``downstreams_of(node)`` iterates: the set if it was made (it may have been
        changed since), else a view of the bitset."""
        if dict.__contains__(self, node):
            return dict.__getitem__(self, node)
        bitset = self._bitsets.get(node)
        if bitset is None:
            return self[node]  # stock adds an empty set for a node it never saw
        return DownstreamSet(bitset, self._nodes, self._index)

    def _make_all(self) -> None:
        """Make every set, the keys in stock's order (then those read that stock never had)."""
        if self._all_made:
            return
        made = dict(dict.items(self))
        dict.clear(self)
        for node, bitset in self._bitsets.items():
            members = made.pop(node, None)
            dict.__setitem__(self, node, _members(bitset, self._nodes) if members is None else members)
        dict.update(self, made)
        self._all_made = True

    def __contains__(self, node: object) -> bool:
        return dict.__contains__(self, node) or node in self._bitsets

    def get(self, node: Node, default: Any = None) -> Any:
        return self[node] if node in self else default

    def __len__(self) -> int:
        return len(self._bitsets) + sum(1 for node in dict.keys(self) if node not in self._bitsets)

    def __iter__(self) -> Iterator[Node]:
        self._make_all()
        return dict.__iter__(self)

    def keys(self) -> Any:
        self._make_all()
        return dict.keys(self)

    def values(self) -> Any:
        self._make_all()
        return dict.values(self)

    def items(self) -> Any:
        self._make_all()
        return dict.items(self)


def _positions(bitset: int) -> list[int]:
    """The positions of `bitset`'s set bits, lowest first."""
    if not bitset:
        return []
    packed = np.frombuffer(bitset.to_bytes((bitset.bit_length() + 7) // 8, "little"), dtype=np.uint8)
    return np.flatnonzero(np.unpackbits(packed, bitorder="little")).tolist()


def _members(bitset: int, nodes: list[Node]) -> set[Node]:
    """The nodes whose bits are set in `bitset` (bit i stands for ``nodes[i]``)."""
    return set(map(nodes.__getitem__, _positions(bitset)))


def downstream_bitsets(graph_module: GraphModule) -> tuple[list[Node], dict[Node, int], dict[Node, int]]:
    """Every node's downstream nodes as a bitset, computed exactly as stock's sets are.

    Stock, walking the graph backwards: ``downstreams[node] |= {user} | downstreams[user]`` for
    each user, reading the user's set as it is at that moment (empty if not yet made); the
    keys appear in the order those reads and writes first touch them. Returns the nodes in
    graph order, each node's position among them (its bit) and the bitsets.
    """
    nodes = list(graph_module.graph.nodes)
    position = {node: i for i, node in enumerate(nodes)}
    bitsets: dict[Node, int] = {}
    for node in reversed(nodes):
        if not node.users:
            continue
        mask = bitsets.setdefault(node, 0)
        for user in node.users:
            mask |= 1 << position[user] | bitsets.setdefault(user, 0)
        bitsets[node] = mask
    return nodes, position, bitsets


def _viewer_init(self: Any, graph_module: GraphModule) -> None:
    """``_DependencyViewer.__init__`` with the downstream sets made on first read."""
    self.downstreams = Downstreams(*downstream_bitsets(graph_module))


def _downstreams_of(self: Any, node: Node) -> Set[Node]:
    """``_DependencyViewer.downstreams_of``: a view of the node's bitset, for a viewer built so."""
    downstreams = self.downstreams
    if type(downstreams) is Downstreams:
        return downstreams.view(node)
    return downstreams[node]


def _replacements() -> list[Replacement]:
    viewer = _upstream.partitioner_dependency_viewer()
    return [
        Replacement(viewer, "__init__", _viewer_init),
        Replacement(viewer, "downstreams_of", _downstreams_of),
    ]


#: Held by ``accelerated_lowering()``.
PARTITION_REACHABILITY = Patch("lowerkit.pass_infra.accelerations.partition_reachability", _replacements)
