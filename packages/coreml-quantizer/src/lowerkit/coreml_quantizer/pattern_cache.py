"""A process-wide, thread-safe cache of traced patterns that hands out private copies.

``SubgraphMatcherWithNameNodeMap`` rewrites its pattern graph in place (it splits the
name-node dict out of the graph's output), so a pattern object must never be
shared: the cache keeps a pristine graph per ``PatternKey`` and every ``get``
returns a fresh deep copy that belongs to the caller alone.
"""

from __future__ import annotations

import copy
import threading
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass

from torch.fx import GraphModule

from lowerkit.coreml_quantizer.patterns import PatternKey, trace_pattern


@dataclass(frozen=True)
class PatternCacheStats:
    """Counters of a `PatternCache`: traces done, lookups served from the cache, seconds spent."""

    builds: int
    hits: int
    build_seconds: float
    copy_seconds: float
    size: int


class PatternCache:
    """Traced patterns by key; ``get`` traces a pattern once per process and returns copies."""

    def __init__(self, builder: Callable[[PatternKey], GraphModule] = trace_pattern) -> None:
        self._builder = builder
        self._patterns: dict[PatternKey, GraphModule] = {}
        # One lock for lookups and builds: torch.export (used to trace) is not
        # thread-safe, and a key must be traced only once even when threads race.
        self._lock = threading.Lock()
        self._builds = 0
        self._hits = 0
        self._build_seconds = 0.0
        self._copy_seconds = 0.0

    def get(self, key: PatternKey) -> GraphModule:
        """A fresh copy of the pattern for ``key``, traced on first use; the caller owns it."""
        with self._lock:
            pristine = self._patterns.get(key)
            if pristine is None:
                start = time.perf_counter()
                pristine = self._builder(key)
                self._build_seconds += time.perf_counter() - start
                self._builds += 1
                self._patterns[key] = pristine
            else:
                self._hits += 1
            start = time.perf_counter()
            private = copy.deepcopy(pristine)
            self._copy_seconds += time.perf_counter() - start
        return private

    def warm(self, keys: Iterable[PatternKey]) -> int:
        """Build every missing pattern in ``keys`` now; returns how many were built.

        ``torch.export`` (used to trace) is not thread-safe even against plain torch
        ops running in other threads, so warm the cache (e.g. with ``all_pattern_keys()``,
        about 10 s) before quantizing from several threads at once.
        """
        built = 0
        for key in keys:
            with self._lock:
                if key in self._patterns:
                    continue
                start = time.perf_counter()
                self._patterns[key] = self._builder(key)
                self._build_seconds += time.perf_counter() - start
                self._builds += 1
                built += 1
        return built

    def __contains__(self, key: object) -> bool:
        with self._lock:
            return key in self._patterns

    def __len__(self) -> int:
        with self._lock:
            return len(self._patterns)

    def stats(self) -> PatternCacheStats:
        """Builds, hits and time spent since creation or the last `clear`."""
        with self._lock:
            return PatternCacheStats(
                builds=self._builds,
                hits=self._hits,
                build_seconds=self._build_seconds,
                copy_seconds=self._copy_seconds,
                size=len(self._patterns),
            )

    def clear(self) -> None:
        """Drop every cached pattern and reset the counters."""
        with self._lock:
            self._patterns.clear()
            self._builds = 0
            self._hits = 0
            self._build_seconds = 0.0
            self._copy_seconds = 0.0


#: The process-wide cache `CoreMLQuantizer` uses.
pattern_cache = PatternCache()
