"""LatencyHistogram: the share of requests within a latency bound, from Prometheus buckets."""

from __future__ import annotations

import math

import pytest

from autoscaler.policy.types import LatencyHistogram, SampleHealth

INF = math.inf


def hist(bounds: tuple[float, ...], rates: tuple[float, ...], t: float = 100.0) -> LatencyHistogram:
    return LatencyHistogram(bounds, rates, t)


@pytest.mark.parametrize(
    ("bounds", "rates", "threshold", "expected"),
    [
        # The docstring's example: 6 + 3 x (2 - 1) / 1.5 = 8 of 10 -> 0.8.
        ((1.0, 2.5, INF), (6.0, 9.0, 10.0), 2.0, 0.8),
        # On a bound: exactly that bound's rate, 9 / 10.
        ((1.0, 2.5, INF), (6.0, 9.0, 10.0), 2.5, 0.9),
        # Inside the first bucket, from 0 at 0: 6 x 0.5 / 1 = 3 -> 0.3.
        ((1.0, 2.5, INF), (6.0, 9.0, 10.0), 0.5, 0.3),
        # Beyond the last finite bound only that bound's rate is known within: 9 / 10.
        ((1.0, 2.5, INF), (6.0, 9.0, 10.0), 100.0, 0.9),
        # No request finished: unknown, never 0 or 1.
        ((1.0, 2.5, INF), (0.0, 0.0, 0.0), 2.0, None),
    ],
)
def test_fraction_within(bounds, rates, threshold, expected) -> None:
    got = hist(bounds, rates).fraction_within(threshold)
    assert got == (None if expected is None else pytest.approx(expected))


@pytest.mark.parametrize(
    ("bounds", "rates", "now", "health"),
    [
        ((1.0, INF), (1.0, 2.0), 110.0, SampleHealth.FRESH),
        ((1.0, INF), (1.0, 2.0), 200.0, SampleHealth.STALE),  # 100 s old, stale after 60
        ((1.0, INF), (2.0, 1.0), 110.0, SampleHealth.NAN),  # a cumulative rate decreasing
        ((1.0, INF), (1.0, math.nan), 110.0, SampleHealth.NAN),
        ((1.0, INF), (-1.0, 1.0), 110.0, SampleHealth.NAN),
        ((1.0, 5.0), (1.0, 2.0), 110.0, SampleHealth.NAN),  # no +Inf bucket
        ((2.0, 1.0, INF), (1.0, 1.0, 2.0), 110.0, SampleHealth.NAN),  # bounds not ascending
        ((1.0, INF), (1.0,), 110.0, SampleHealth.NAN),  # lengths differ
        ((), (), 110.0, SampleHealth.NAN),
        ((math.nan, INF), (1.0, 2.0), 110.0, SampleHealth.NAN),  # a NaN bound
        ((1.0, 1.0, INF), (1.0, 1.0, 2.0), 110.0, SampleHealth.NAN),  # a bound twice
        ((1.0, INF), (1e308, 1e308), 110.0, SampleHealth.NAN),  # rates overflow a sum: refused, no crash
        ((1.0, INF), (0.0, INF), 110.0, SampleHealth.NAN),
    ],
)
def test_health(bounds, rates, now, health) -> None:
    assert hist(bounds, rates).health(now, 60.0) is health
