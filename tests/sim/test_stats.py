"""RequestStats: SLO attainment and the misses per minute of arrival."""

from __future__ import annotations

import numpy as np
import pytest

from autoscaler.sim.engine import Finished
from autoscaler.sim.stats import RequestStats, Slo


def _fin(arrival: list[float], ttft: list[float], tpot: list[float] | None = None) -> Finished:
    a = np.array(arrival, dtype=np.float64)
    return Finished(a, np.array(ttft, dtype=np.float64),
                    np.array(tpot if tpot is not None else [0.05] * len(arrival), dtype=np.float64),
                    np.zeros(a.size), np.full(a.size, 10, dtype=np.int64), a + 1.0)


@pytest.mark.parametrize(
    ("batches", "missed", "attainment"),
    [
        # docstring example: 10 s ok; 70 s and 130 s have TTFT 3 s > 2 s -> [0, 1, 1], 1/3 met
        ([([10.0, 70.0, 130.0], [0.5, 3.0, 3.0], None)], [0, 1, 1], 1 / 3),
        # TPOT 0.2 s > 0.1 s misses too; a failed request (TTFT inf) misses; two batches add up
        ([([5.0], [0.1], [0.2]), ([6.0, 200.0], [np.inf, 0.1], None)], [2], 1 / 3),
        # nothing missed: no bins at all
        ([([1.0, 61.0], [0.1, 0.1], None)], [], 1.0),
        # a later batch with an earlier bin adds into the existing array
        ([([190.0], [9.0], None), ([20.0], [9.0], None)], [1, 0, 0, 1], 0.0),
    ],
)
def test_misses_are_counted_by_minute_of_arrival(batches: list[tuple[list[float], list[float], list[float] | None]],
                                                 missed: list[int], attainment: float) -> None:
    st = RequestStats(Slo(2.0, 0.1), bin_s=60.0)
    for arrival, ttft, tpot in batches:
        st.add(_fin(arrival, ttft, tpot))
    assert st.missed_by_arrival.tolist() == missed
    assert st.attainment == pytest.approx(attainment)
    assert int(st.missed_by_arrival.sum()) == st.total - st.ok
