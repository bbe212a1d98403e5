"""Time windows in seconds: time-weighted averages, plain means, maxima."""

from __future__ import annotations

import pytest

from autoscaler.baselines.window import TimeWindow


def test_time_weighted_average() -> None:
    w = TimeWindow(60.0)
    w.add(0.0, 0.0)
    w.add(4.0, 10.0)
    # window [0, 6) at now 6: 0 for 4 s, 10 for 2 s -> 20 / 6
    assert w.average(6.0, 6.0) == pytest.approx(20 / 6)
    # window [3, 6): 0 for 1 s, 10 for 2 s -> 20 / 3
    assert w.average(6.0, 3.0) == pytest.approx(20 / 3)
    # the same load sampled every 2 s gives the same average
    v = TimeWindow(60.0)
    for t, x in ((0.0, 0.0), (2.0, 0.0), (4.0, 10.0)):
        v.add(t, x)
    assert v.average(6.0, 6.0) == pytest.approx(20 / 6)


def test_a_single_sample_at_now_is_its_own_average() -> None:
    w = TimeWindow(30.0)
    w.add(5.0, 7.0)
    assert w.average(5.0, 30.0) == 7.0 and TimeWindow(30.0).average(5.0, 30.0) is None


def test_mean_and_maximum_over_the_window() -> None:
    w = TimeWindow(300.0)
    for t, x in ((0.0, 8.0), (15.0, 4.0), (30.0, 2.0)):
        w.add(t, x)
    assert w.mean(30.0, 30.0) == pytest.approx(3.0)  # (15 and 30: (4 + 2) / 2)
    assert w.maximum(300.0, 300.0) == 4.0  # (0, 300]: t = 0 is out
    assert w.maximum(299.0, 300.0) == 8.0


def test_old_samples_are_dropped_but_one_is_kept_to_hold_into_the_window() -> None:
    w = TimeWindow(10.0)
    for t in range(0, 31, 5):
        w.add(float(t), float(t))
    assert [t for t, _ in w.samples][0] == 20.0  # 20 holds over [20, 25) which is inside (30 - 10)
