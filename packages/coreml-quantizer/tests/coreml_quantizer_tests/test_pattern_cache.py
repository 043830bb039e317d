"""pattern_cache: one trace per key per process, a private copy per caller, thread-safe."""

from __future__ import annotations

import operator
import threading
from concurrent.futures import ThreadPoolExecutor

import torch
import torch.nn.functional as F
from torch.fx.passes.utils.matcher_with_name_node_map_utils import (
    SubgraphMatcherWithNameNodeMap,
)

from lowerkit.coreml_quantizer import PatternCache, PatternKey, all_pattern_keys, pattern_cache
from lowerkit.coreml_quantizer.patterns import trace_pattern

CONV_RELU = PatternKey("conv", 2, F.relu, False)


def test_all_executorch_patterns_have_distinct_keys() -> None:
    keys = all_pattern_keys()
    assert len(keys) == 405
    assert len(set(keys)) == 405


def test_keys_are_the_real_arguments() -> None:
    assert PatternKey("conv", 2, F.relu, True) == PatternKey("conv", 2, F.relu, True)
    assert PatternKey("conv", 2, F.relu, True) != PatternKey("conv", 2, F.relu, False)
    assert PatternKey("binary_op", operator.add) != PatternKey("binary_op", torch.add)
    assert PatternKey("binary_op", operator.add) != PatternKey("binary_op", operator.iadd)


def test_second_get_is_a_hit_and_a_different_object(fresh_cache: None) -> None:
    first = pattern_cache.get(CONV_RELU)
    second = pattern_cache.get(CONV_RELU)
    stats = pattern_cache.stats()
    assert (stats.builds, stats.hits, stats.size) == (1, 1, 1)
    assert first is not second
    assert first.graph is not second.graph
    assert {id(n) for n in first.graph.nodes}.isdisjoint({id(n) for n in second.graph.nodes})
    assert first.code == second.code


def test_a_matcher_mutating_its_copy_does_not_affect_the_next_caller(fresh_cache: None) -> None:
    key = PatternKey("linear", None, F.relu, True)
    pristine_code = pattern_cache.get(key).code
    # The matcher splits the name-node dict out of the pattern's output, in place.
    SubgraphMatcherWithNameNodeMap(pattern_cache.get(key), ignore_literals=True)
    again = pattern_cache.get(key)
    assert again.code == pristine_code
    SubgraphMatcherWithNameNodeMap(again, ignore_literals=True)  # would fail on a split graph
    assert pattern_cache.stats().builds == 1


def test_clear_drops_patterns_and_counters(fresh_cache: None) -> None:
    pattern_cache.get(CONV_RELU)
    pattern_cache.clear()
    stats = pattern_cache.stats()
    assert (stats.builds, stats.hits, stats.size, stats.build_seconds) == (0, 0, 0, 0.0)
    assert CONV_RELU not in pattern_cache
    pattern_cache.get(CONV_RELU)
    assert pattern_cache.stats().builds == 1


def test_racing_threads_build_once_and_get_their_own_copies() -> None:
    cache = PatternCache()
    keys = [CONV_RELU, PatternKey("binary_op", operator.mul, F.relu6, True)]
    barrier = threading.Barrier(8)

    def work(index: int) -> list[torch.fx.GraphModule]:
        barrier.wait()
        return [cache.get(keys[index % 2]) for _ in range(3)]

    with ThreadPoolExecutor(max_workers=8) as pool:
        got = [pattern for patterns in pool.map(work, range(8)) for pattern in patterns]
    stats = cache.stats()
    assert (stats.builds, stats.hits) == (2, 22)
    assert len({id(p) for p in got}) == 24
    codes = {p.code for p in got}
    assert codes == {trace_pattern(k).code for k in keys}


def test_warm_builds_missing_patterns_only() -> None:
    cache = PatternCache()
    cache.get(CONV_RELU)
    other = PatternKey("linear", None, F.gelu, False)
    assert cache.warm([CONV_RELU, other]) == 1
    assert cache.stats().builds == 2
    assert other in cache


def test_builder_is_pluggable() -> None:
    calls: list[PatternKey] = []

    def builder(key: PatternKey) -> torch.fx.GraphModule:
        calls.append(key)
        return trace_pattern(key)

    cache = PatternCache(builder)
    cache.get(CONV_RELU)
    cache.get(CONV_RELU)
    assert calls == [CONV_RELU]


def test_build_seconds_count_builds_only() -> None:
    import time

    def slow_builder(key: PatternKey) -> torch.fx.GraphModule:
        time.sleep(0.05)
        return trace_pattern(key)

    cache = PatternCache(builder=slow_builder)
    cache.get(CONV_RELU)
    after_build = cache.stats().build_seconds
    assert after_build >= 0.05
    cache.get(CONV_RELU)  # a hit: no build time added
    assert cache.stats().build_seconds == after_build
