"""histogram_search / accelerated_quantization: the same observer ranges as torchao's, bit for bit."""

from __future__ import annotations

import threading

import pytest
import torch
from torchao.quantization.pt2e.observer import HistogramObserver

from lowerkit.pass_infra import accelerated_quantization
from lowerkit.pass_infra.accelerations.histogram_search import non_linear_param_search


def _data(kind: str, seed: int) -> list[torch.Tensor]:
    g = torch.Generator().manual_seed(seed)
    n = 4096
    if kind == "normal":
        return [torch.randn(n, generator=g) for _ in range(3)]
    if kind == "relu":  # half the mass in one bin
        return [torch.randn(n, generator=g).clamp_min(0) for _ in range(2)]
    if kind == "outlier":  # one huge value leaves the rest a few bins
        x = torch.randn(n, generator=g)
        x[7] = 300.0
        return [x]
    if kind == "heavy_tail":
        return [torch.distributions.StudentT(1.5).sample((n,)) for _ in range(2)]
    if kind == "constant":
        return [torch.full((n,), 0.25)]
    if kind == "tiny":
        return [torch.randn(5, generator=g) * 1e-6]
    if kind == "uniform":
        return [torch.rand(n, generator=g) * 8 - 2 for _ in range(4)]
    raise ValueError(kind)


KINDS = ("normal", "relu", "outlier", "heavy_tail", "constant", "tiny", "uniform")


def _observer(kind: str, seed: int, **kwargs: object) -> HistogramObserver:
    torch.manual_seed(seed)
    observer = HistogramObserver(**kwargs)
    for batch in _data(kind, seed):
        observer(batch)
    return observer


def _same(a: tuple[torch.Tensor, torch.Tensor], b: tuple[torch.Tensor, torch.Tensor]) -> bool:
    return all(x.dtype == y.dtype and torch.equal(x, y) for x, y in zip(a, b, strict=True))


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("seed", range(4))
def test_same_min_max_as_torchao(kind: str, seed: int) -> None:
    observer = _observer(kind, seed)
    assert _same(non_linear_param_search(observer), observer._non_linear_param_search())


@pytest.mark.parametrize("kwargs", [{"bins": 256}, {"bins": 2048, "dtype": torch.qint32}, {"dtype": torch.quint8}])
def test_same_for_other_settings(kwargs: dict[str, object]) -> None:
    for kind in ("normal", "outlier", "relu"):
        observer = _observer(kind, 11, **kwargs)
        assert _same(non_linear_param_search(observer), observer._non_linear_param_search())


@pytest.mark.parametrize("dtype", [torch.float64, torch.bfloat16, torch.float16])
def test_other_histogram_dtypes(dtype: torch.dtype) -> None:
    observer = _observer("normal", 3)
    observer.histogram = observer.histogram.to(dtype)
    assert _same(non_linear_param_search(observer), observer._non_linear_param_search())


def test_unsorted_walk() -> None:
    """A histogram whose cumulative sum is not monotone takes the linear walk."""
    observer = _observer("normal", 4)
    observer.histogram[100] = -observer.histogram.sum() / 3  # never observed, but the walk must still agree
    assert _same(non_linear_param_search(observer), observer._non_linear_param_search())


def test_the_search_is_taken_by_the_search_itself() -> None:
    """The comparison against stock is not vacuous: the search moves the range in from the data's."""
    observer = _observer("normal", 0)
    new_min, new_max = non_linear_param_search(observer)
    assert float(observer.min_val) <= float(new_min) < float(new_max) < float(observer.max_val)


def test_scope_replaces_the_method_only_inside_and_only_for_its_thread() -> None:
    original = HistogramObserver.__dict__["_non_linear_param_search"]
    observer = _observer("outlier", 1)
    calls: list[str] = []
    seen_outside: list[bool] = []

    def other_thread() -> None:
        seen_outside.append(HistogramObserver._non_linear_param_search is original)

    with accelerated_quantization():
        assert HistogramObserver.__dict__["_non_linear_param_search"] is not original
        inside = observer.calculate_qparams()
        calls.append("inside")
    assert HistogramObserver.__dict__["_non_linear_param_search"] is original
    assert [torch.equal(a, b) for a, b in zip(inside, observer.calculate_qparams(), strict=True)] == [True, True]
    thread = threading.Thread(target=other_thread)
    thread.start()
    thread.join()
    assert seen_outside == [True] and calls == ["inside"]
