"""Two quantizers used from 8 threads on different models give the single-threaded results."""

from __future__ import annotations

import threading
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from coreml_quantizer_tests.conftest import (
    exported,
    fingerprint,
    quantize,
    static_config,
    weight_only_config,
)
from lowerkit.coreml_quantizer import CoreMLQuantizer, pattern_cache


def test_two_quantizers_in_eight_threads() -> None:
    conv_quantizer = CoreMLQuantizer(static_config(per_channel=True))
    linear_quantizer = CoreMLQuantizer(weight_only_config(per_channel=False))
    # Models without batch norm: for those, torchao's convert_pt2e itself runs
    # torch.export (to fold conv+bn), and torch.export is not thread-safe.
    jobs = [("conv_plain", conv_quantizer), ("linear", linear_quantizer)]

    # Reference: one thread. It also builds the patterns these models need:
    # torch.export (used to trace a pattern) is not thread-safe even against plain
    # torch ops in other threads, so patterns must exist before threads start.
    pattern_cache.clear()
    expected = {name: fingerprint(quantize(name, q, threads_pinned=False)) for name, q in jobs}
    builds = pattern_cache.stats().builds
    assert builds > 0

    # torch.export is not thread-safe either: export every thread's models up front.
    models = [[exported(jobs[i % 2][0]) for _ in range(2)] for i in range(8)]
    barrier = threading.Barrier(8)

    def work(index: int) -> list[tuple[str, dict[str, Any]]]:
        name, quantizer = jobs[index % 2]
        barrier.wait()
        return [(name, fingerprint(quantize(name, quantizer, model=model, threads_pinned=False))) for model in models[index]]

    with ThreadPoolExecutor(max_workers=8) as pool:  # a thread's error is raised here
        results = [result for one_thread in pool.map(work, range(8)) for result in one_thread]
    assert len(results) == 16
    for name, result in results:
        assert result == expected[name], name
    # The threads shared the cache: nothing was rebuilt, every pattern came as a copy.
    stats = pattern_cache.stats()
    assert stats.builds == builds
    assert stats.hits >= 16 * 2
