"""TimeWindow: each docstring's worked example is a row here, then the rule as properties."""

from __future__ import annotations

import json
import pickle

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from autoscaler.policy.time_window import TimeWindow

W = TimeWindow


# --- worked examples ---------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("entries", "now", "seconds", "expected"),
    [
        (((1000.0, 1), (1001.0, 2), (1120.0, 3)), 1120.0, 120.0, ((1001.0, 2), (1120.0, 3))),  # docstring
        (((1000.0, 1), (1001.0, 2)), 1120.0, 121.0, ((1000.0, 1), (1001.0, 2))),  # 120 s old, window 121
        (((1001.0, 2), (1000.0, 1)), 1120.0, 120.0, ((1001.0, 2),)),  # out of order: pruned all the same
        ((), 1120.0, 120.0, ()),
    ],
)
def test_within(entries: tuple, now: float, seconds: float, expected: tuple) -> None:
    assert W(entries).within(now, seconds) == expected


def test_within_keeps_the_very_window_when_nothing_drops() -> None:
    window = W(((1001.0, 2), (1120.0, 3)))
    assert window.within(1120.0, 120.0) is window


@pytest.mark.parametrize(
    ("entries", "now", "value", "seconds", "expected"),
    [
        # docstring: the 1000 is 120 s old, the 1120 is taken again
        (((1000.0, 1.0), (1001.0, 2.0), (1120.0, 3.0)), 1120.0, 5.0, 120.0, ((1001.0, 2.0), (1120.0, 5.0))),
        (((1001.0, 2.0),), 1120.0, 5.0, 120.0, ((1001.0, 2.0), (1120.0, 5.0))),  # 119 s old: stays
        (((1001.0, 2.0), (1130.0, 3.0)), 1120.0, 5.0, 120.0, ((1001.0, 2.0), (1120.0, 5.0))),  # clock back
        (((1001.0, 2.0),), 1120.0, 5.0, 0.0, ()),  # a window of 0 s keeps nothing
    ],
)
def test_record_reading(entries: tuple, now: float, value: float, seconds: float, expected: tuple) -> None:
    assert W(entries).record_reading(now, value, seconds) == expected


@pytest.mark.parametrize(
    ("entries", "value", "expected"),
    [
        (((100.0, 6), (200.0, 4), (300.0, 3)), 4, ((100.0, 6), (400.0, 4))),  # docstring
        (((100.0, 6),), 7, ((400.0, 7),)),  # a new maximum: the window is that alone
        ((), 3, ((400.0, 3),)),
    ],
)
def test_record_peak(entries: tuple, value: int, expected: tuple) -> None:
    assert W(entries).record_peak(400.0, value) == expected


def test_record_newest_and_total() -> None:
    assert W(((15.0, 2),)).record(30.0, 3) == ((15.0, 2), (30.0, 3))  # docstring
    assert W(((1.0, 10.0), (2.0, 20.0), (3.0, 30.0))).newest(2) == ((2.0, 20.0), (3.0, 30.0))  # docstring
    assert W(((990.0, 1), (1000.0, 2))).total() == 3  # docstring
    assert W().total() == 0


@pytest.mark.parametrize(
    ("seconds", "floor", "expected"),
    [(600.0, 3, 4), (601.0, 3, 6), (600.0, 5, 5)],  # docstring: the 6 (t = 400) is 600 s old at 1000
)
def test_highest(seconds: float, floor: int, expected: int) -> None:
    assert W(((400.0, 6), (700.0, 4))).highest(1000.0, seconds, floor) == expected


@pytest.mark.parametrize(("now", "expected"), [(1059.0, 5), (1060.0, 8)])  # docstring: 59 s in, 60 s out
def test_lowest(now: float, expected: int) -> None:
    assert W(((1000.0, 5),)).lowest(now, 60.0, 8) == expected


def test_a_window_is_its_tuple() -> None:
    entries = ((1.0, 2.0), (3.0, 4.0))
    window = W(entries)
    assert window == entries and hash(window) == hash(entries)
    assert repr(window) == repr(entries) and json.dumps(window) == json.dumps(entries)
    assert pickle.loads(pickle.dumps(window)) == window
    assert W.of(window) is window and W.of(entries) == window and type(W.of(entries)) is W


# --- the rule: inside a window of `seconds` at `now` when now - t < seconds ---------------------
times = st.floats(min_value=0, max_value=1000, allow_nan=False)
entries = st.lists(st.tuples(times, st.integers(0, 40)), max_size=8).map(tuple)


@settings(max_examples=200, deadline=None)
@given(entries, times, st.floats(min_value=0, max_value=600, allow_nan=False))
def test_within_highest_lowest_total_follow_the_rule(es: tuple, now: float, seconds: float) -> None:
    inside = [(t, v) for t, v in es if now - t < seconds]
    window = W(es)
    # `within` stamps an entry from the future (a clock stepped back) `now`: in for one window
    pruned = [(min(t, now), v) for t, v in es if now - min(t, now) < seconds]
    assert list(window.within(now, seconds)) == pruned
    assert window.highest(now, seconds, -1) == max([v for _, v in inside], default=-1)
    assert window.lowest(now, seconds, 99) == min([v for _, v in inside], default=99)
    assert window.within(now, seconds).total() == sum(v for _, v in pruned)


@settings(max_examples=200, deadline=None)
@given(entries, times, st.floats(min_value=0, max_value=600, allow_nan=False))
def test_record_reading_is_within_before_now_then_record_for_readings_in_time_order(
    es: tuple, now: float, seconds: float
) -> None:
    readings = W(sorted(es))
    expected = [(t, v) for t, v in readings if 0 < now - t < seconds] + ([(now, 7)] if seconds > 0 else [])
    assert list(readings.record_reading(now, 7, seconds)) == expected


@settings(max_examples=200, deadline=None)
@given(st.lists(st.integers(0, 40), max_size=10), st.floats(min_value=1, max_value=100))
def test_record_peak_keeps_every_later_maximum(values: list[int], seconds: float) -> None:
    """Recording one value a second, the peak window and the full one have the same highest
    value inside any window, now and later."""
    peak, full = W(), W()
    for k, v in enumerate(values):
        peak, full = peak.record_peak(float(k), v), full.record(float(k), v)
        for later in (float(k), k + seconds / 2, k + seconds):
            assert peak.highest(later, seconds, -1) == full.highest(later, seconds, -1)
