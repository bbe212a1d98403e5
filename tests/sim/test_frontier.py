"""Frontiers: the monotone lower envelope, cost at a target, and its interval over seeds."""

from __future__ import annotations

import math

import pytest

from autoscaler.sim.frontier import cost_at, cost_at_with_ci, envelope, half_width, mean_ci, t975

POINTS = [(1.0, 0.80), (2.0, 0.95), (1.5, 0.70), (3.0, 0.99), (4.0, 0.985)]


def test_envelope_drops_dominated_points() -> None:
    # (1.5, 0.70) costs more than (1, 0.80) and attains less; (4, 0.985) likewise against (3, 0.99)
    assert envelope(POINTS) == [(1.0, 0.80), (2.0, 0.95), (3.0, 0.99)]
    assert envelope([(1.0, 0.9), (1.0, 0.95)]) == [(1.0, 0.95)]  # a tie in cost keeps the better point


@pytest.mark.parametrize(("target", "cost"), [
    (0.90, 1.0 + (0.90 - 0.80) / (0.95 - 0.80) * (2.0 - 1.0)),  # 1.6667, between the first two
    (0.95, 2.0),
    (0.97, 2.0 + (0.97 - 0.95) / (0.99 - 0.95) * 1.0),  # 2.5
    (0.99, 3.0),
    (0.50, 1.0),  # the cheapest point already reaches it: no extrapolation below the grid
    (0.995, None),  # never reached
])
def test_cost_at_interpolates_on_the_envelope(target: float, cost: float | None) -> None:
    got = cost_at(POINTS, target)
    assert got == (None if cost is None else pytest.approx(cost))


def test_student_t_interval() -> None:
    assert t975(2) == 4.303 and t975(100) == 1.96
    # values 1, 2, 3: mean 2, sd 1, h = 4.303 / sqrt(3) = 2.4843
    assert half_width([1.0, 2.0, 3.0]) == pytest.approx(4.303 / math.sqrt(3))
    assert mean_ci([1.0, 2.0, 3.0]) == {"mean": 2.0, "ci95": pytest.approx([2.0 - 2.4843, 2.0 + 2.4843], abs=1e-4)}
    assert mean_ci([5.0]) == {"mean": 5.0, "ci95": None}
    assert half_width([]) is None


def test_the_interval_holds_where_each_seed_crosses_the_target() -> None:
    # the docstring's example: seeds (0.8, 0.88) / (1.2, 0.92) at point 0, (3, 0.98) / (3, 1.0) at point 1
    mean_pts = [(1.0, 0.90), (3.0, 0.99)]
    seeds = [[(0.8, 0.88), (1.2, 0.92)], [(3.0, 0.98), (3.0, 1.0)]]
    # at 0.99 the mixture is point 1 itself (w = 1); both seeds pay 3, but seed A attains 0.98 there
    # and seed B 1.0: y = 3 + 22.2 x 0.01 = 3.222 and 2.778 (a zero-width [3, 3] without the term)
    got, ys, atts = cost_at_with_ci(mean_pts, seeds, 0.99)
    assert ys == [pytest.approx(3.0 + 0.01 / 0.09 * 2), pytest.approx(3.0 - 0.01 / 0.09 * 2)]
    assert atts == [pytest.approx(0.98), pytest.approx(1.0)]
    assert got is not None and got["mean"] == pytest.approx(3.0) and got["ci95"][1] > 3.0 > got["ci95"][0]
    got, ys, atts = cost_at_with_ci(mean_pts, seeds, 0.945)  # half way: w 0.5, slope 2 / 0.09
    slope = 2.0 / 0.09
    assert atts == [pytest.approx(0.93), pytest.approx(0.96)]
    assert ys == [pytest.approx(1.9 + slope * 0.015), pytest.approx(2.1 - slope * 0.015)]
    assert got is not None and got["mean"] == pytest.approx(cost_at(mean_pts, 0.945)) == pytest.approx(2.0)
    h = 12.706 * abs(ys[0] - ys[1]) / math.sqrt(2) / math.sqrt(2)  # sd of two values = |a - b| / sqrt(2)
    assert got["ci95"] == pytest.approx([0.0, 2.0 + h])  # the low end clipped at 0


def test_a_fleet_whose_cost_never_varies_still_has_an_interval() -> None:
    # The review's toy: fleets of 6, 7 and 8 replicas cost exactly 6, 7, 8 on every seed; their
    # attainments vary. Target 0.99 between 6 (mean 0.9767) and 7 (mean 0.9917): w = 0.8889, value 6.889.
    # The seeds' costs at that mixture are all 6.889 (a zero-width interval before); each seed's
    # attainment there (0.991, 0.9948, 0.9842) says where it crosses, and the interval holds that.
    att = {6: (0.975, 0.985, 0.970), 7: (0.993, 0.996, 0.986), 8: (0.998, 0.999, 0.995)}
    mean_pts = [(float(n), sum(a) / 3) for n, a in att.items()]
    seeds = [[(float(n), x) for x in a] for n, a in att.items()]
    got, ys, atts = cost_at_with_ci(mean_pts, seeds, 0.99)
    assert got is not None and got["mean"] == pytest.approx(6.889, abs=1e-3)
    assert atts == pytest.approx([0.991, 0.99483, 0.98422], abs=1e-4)
    low, high = got["ci95"]  # type: ignore[misc]
    assert high - low > 1.5  # about [6.0, 7.8]: the seeds cross 0.99 near 6.8, 6.6 and 7.3 replicas
    assert low < 6.6 and high > 7.3


def test_no_seed_picks_its_own_knob() -> None:
    # The review's counterexample: knobs costing 10 / 12 / 14, each reaching 0.99 on one seed only
    # (mean attainment 0.978 at every knob). Each seed's own envelope reaches 0.99 - at a different
    # knob - so a mean of per-seed envelope costs published 11.6; no single setting reaches it.
    seeds_att = [[0.995, 0.97, 0.97], [0.97, 0.995, 0.97], [0.97, 0.97, 0.995]]  # per knob, per seed
    mean_pts = [(c, sum(a) / 3) for c, a in zip((10.0, 12.0, 14.0), seeds_att)]
    seeds = [[(c, a) for a in att] for c, att in zip((10.0, 12.0, 14.0), seeds_att)]
    assert cost_at_with_ci(mean_pts, seeds, 0.99) == (None, [], [])


def test_not_reached_by_the_mean_envelope_and_non_finite_points_left_out() -> None:
    assert cost_at_with_ci([(1.0, 0.9)], [[(1.0, 0.9)]], 0.999) == (None, [], [])
    one, _, _ = cost_at_with_ci([(1.0, 0.9), (3.0, 0.99)], [[(1.0, 0.9)], [(3.0, 0.99)]], 0.99)  # one seed
    assert one == {"mean": 3.0, "ci95": None}
    # a NaN attainment at the cheapest point no longer hides the rest of the envelope
    assert cost_at([(1.0, math.nan), (2.0, 0.95), (3.0, 0.999)], 0.99) == pytest.approx(2.0 + 0.04 / 0.049)


def test_intervals_are_clipped_to_the_quantity_range() -> None:
    # attainments 0.99 and 1.0: mean 0.995, h = 12.706 x 0.00707 / 1.414 = 0.0635 -> [0.9315, 1.0]
    got = mean_ci([0.99, 1.0], 0.0, 1.0)
    assert got["mean"] == pytest.approx(0.995)
    assert got["ci95"] == pytest.approx([0.995 - 12.706 * 0.005, 1.0])
