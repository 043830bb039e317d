"""Range diagnostics of the three outlier shapes, blame at data-movement layers, and the keep-float search."""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import pytest

from lowerkit.pass_infra.numerics.keep_float import outermost, search_keep_float
from lowerkit.pass_infra.numerics.metrics import TensorError
from lowerkit.pass_infra.numerics.ranges import MIN_LEVELS, channel_axis, range_diagnostic
from lowerkit.pass_infra.numerics.report import DebugReport, LayerNumerics


def _conv_output(seed: int = 0) -> np.ndarray:
    return np.random.default_rng(seed).normal(0.0, 0.3, size=(1, 8, 16, 16))


def _scale(values: np.ndarray) -> float:
    """An asymmetric int8 scale covering zero and the tensor's range, as the observers compute."""
    return float(max(values.max(), 0.0) - min(values.min(), 0.0)) / 255


def test_an_offset_channel_with_an_ordinary_spread_is_flagged_as_offset() -> None:
    values = _conv_output()
    values[:, 3] = 40.0 + 0.1 * values[:, 3]  # far from zero, a small spread (one large bias)
    spans = values.max(axis=(0, 2, 3)) - values.min(axis=(0, 2, 3))
    assert spans[3] < np.median(spans)  # comparing spans alone sees nothing unusual
    found = range_diagnostic(values, _scale(values))
    assert found is not None and found.flagged and found.kind == "offset" and found.channel == 3
    assert found.setters == (3,) and found.share > 0.9 and found.others_levels < MIN_LEVELS
    line = found.describe()
    assert line.startswith("channel 3 sits at 39.") and "sets the scale" in line
    assert f"~{found.others_levels:.0f} of 256 levels" in line


def test_a_wide_channel_is_flagged_as_wide() -> None:
    values = _conv_output()
    values[:, 5] *= 60.0
    found = range_diagnostic(values, _scale(values))
    assert found is not None and found.flagged and (found.kind, found.channel) == ("wide", 5)
    assert "channel 5 spans" in found.describe()


def test_a_channel_with_a_few_far_values_is_flagged_as_heavy_tailed() -> None:
    values = np.random.default_rng(1).normal(0.0, 0.3, size=(1, 32, 16))  # [batch, tokens, features]
    values[0, 0, 5] = 60.0  # one token's feature 5: a "massive activation"
    axis = channel_axis("aten.linear", values.ndim)
    found = range_diagnostic(values, _scale(values), axis)
    assert found is not None and found.flagged and (found.kind, found.channel) == ("heavy-tailed", 5)
    assert found.tail == (1, 32) and "1 of its 32 values reach 60" in found.describe()


def test_channels_sharing_the_range_evenly_are_not_flagged() -> None:
    values = _conv_output()
    found = range_diagnostic(values, _scale(values))
    assert found is not None and not found.flagged and not found.setters
    assert channel_axis("aten.conv2d", 3) == 1 and channel_axis("aten.linear", 3) == -1


def test_dead_channels_are_not_counted_as_starved() -> None:
    values = np.maximum(_conv_output(), 0.0)
    values[:, 2:] = 0.0  # six channels dead after the ReLU: they need no levels
    found = range_diagnostic(values, _scale(values))
    assert found is not None and not found.flagged and not found.setters, found
    values[:, 1] = 0.0  # one live channel left: nothing to compare it with
    assert range_diagnostic(values, _scale(values)) is None


def _layer(name: str, op: str, index: int, sqnr: float, scale: float, inputs: tuple[str, ...] = ()) -> LayerNumerics:
    return LayerNumerics(name, op, index, TensorError(sqnr, 0.1, 0.99, 0.5), scale=scale, inputs=inputs, keepable=True)


@pytest.fixture
def sliced() -> DebugReport:
    """conv (fine alone) -> slice sharing its scale (where the error shows) -> conv."""
    layers = [
        _layer("stem", "aten.conv2d", 0, 48.0, 0.16),
        _layer("pick", "aten.slice", 1, 12.0, 0.16, ("stem",)),
        _layer("head", "aten.conv2d", 2, 12.0, 0.01, ("pick",)),
    ]
    return DebugReport("m", "t", "c", layers, output_sqnr_db=12.0, threshold_kind="db", threshold=20.0)


def test_error_shown_at_a_data_movement_layer_is_charged_to_its_producer(sliced: DebugReport) -> None:
    pick = sliced.layers[1]
    assert sliced.worst_first()[0] is pick  # the slice shows the most added error ...
    assert sliced.producer(pick) is sliced.layers[0] and sliced.producer(sliced.layers[0]) is None
    assert sliced.culprits() == ["stem", "pick", "head"]  # ... but its producer is named first, each once
    advice = " ".join(sliced.advice())
    assert "appears at pick" in advice and "stem's quantization range is what loses it" in advice
    data = sliced.to_json()
    assert data["error_moved_at"] == {"layer": "pick", "producer": "stem"}
    assert {row["name"]: row["blame"] for row in data["layers"]} == {"stem": None, "pick": "stem", "head": None}
    # The slice shares the conv's scale: the pair is tried as one candidate.
    assert ("stem", "pick") in sliced.keep_float_candidates(3)


def _evaluator(
    table: dict[frozenset[str], float], base: float, calls: list[tuple[str, ...]]
) -> Callable[[tuple[str, ...]], float]:
    def evaluate(names: tuple[str, ...]) -> float:
        calls.append(names)
        return table.get(frozenset(names), base)

    return evaluate


def test_search_finds_the_pair_no_single_layer_fixes() -> None:
    calls: list[tuple[str, ...]] = []
    evaluate = _evaluator({frozenset({"stem", "pick"}): 42.0, frozenset({"head"}): 13.0}, 12.0, calls)
    found = search_keep_float([("stem",), ("pick",), ("head",), ("stem", "pick")], evaluate, 12.0, 30.0, budget=8)
    assert found.names == ("stem", "pick") and found.reached and found.output_sqnr_db == 42.0
    assert "--keep-float stem --keep-float pick" in found.line()
    assert len(calls) == len(set(map(frozenset, calls))) <= 8  # each set lowered once, within the budget


def test_greedy_search_grows_then_prunes_to_what_the_target_needs() -> None:
    gains = {"a": 6.0, "b": 15.0, "c": 1.0, "d": 0.0}

    def evaluate(names: tuple[str, ...]) -> float:
        return 12.0 + sum(gains[n] for n in names)

    found = search_keep_float([(n,) for n in gains], evaluate, 12.0, 30.0, budget=12)
    assert set(found.names) == {"a", "b"} and found.reached, found
    short = search_keep_float([(n,) for n in gains], evaluate, 12.0, 60.0, budget=12)
    assert not short.reached and short.helps and "short of the target" in short.line()
    spent = search_keep_float([(n,) for n in gains], evaluate, 12.0, 30.0, budget=4)
    assert len(spent.trials) == 4 and spent.names == ("b",)  # no trial left to grow the set


def test_nothing_is_advised_when_nothing_helps_or_the_output_already_reaches_the_target() -> None:
    found = search_keep_float([("a",), ("b",)], lambda names: 12.2, 12.0, 30.0)
    assert found.names == () and not found.helps and "no keep-float set" in found.line()
    fine = search_keep_float([("a",)], lambda names: 50.0, 35.0, 30.0)
    assert fine.names == () and fine.trials == () and "reaches the target" in fine.line()


def test_a_module_inside_another_kept_in_float_is_not_named_again() -> None:
    assert outermost(("block1.2", "block1", "fc", "block1", "block10")) == ("block1", "fc", "block10")
    calls: list[tuple[str, ...]] = []
    evaluate = _evaluator({frozenset({"block1"}): 40.0}, 4.0, calls)
    found = search_keep_float([("block1",), ("block1", "block1.2")], evaluate, 4.0, 30.0)
    assert found.names == ("block1",) and calls == [("block1",)]  # the group is block1 again: not lowered twice
