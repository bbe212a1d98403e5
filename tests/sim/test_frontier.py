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


def test_the_interval_is_the_seeds_spread_at_the_mean_envelopes_operating_point() -> None:
    mean_pts = [(1.0, 0.90), (3.0, 0.99)]
    seed_costs = [[0.8, 1.2], [2.8, 3.2]]
    got, per_seed = cost_at_with_ci(mean_pts, seed_costs, 0.99)  # operating point: grid point 1
    h = 12.706 * math.sqrt(0.08) / math.sqrt(2)  # sd of (2.8, 3.2) = 0.2828; t(0.975, 1) = 12.706
    assert per_seed == [pytest.approx(2.8), pytest.approx(3.2)]
    assert got is not None and got["mean"] == pytest.approx(3.0) and got["ci95"] == pytest.approx([3.0 - h, 3.0 + h])
    # at 0.945, half way: each seed's cost at the same mixture, 1.8 and 2.2; their mean is cost_at's 2.0
    got, per_seed = cost_at_with_ci(mean_pts, seed_costs, 0.945)
    assert per_seed == [pytest.approx(1.8), pytest.approx(2.2)]
    assert got is not None and got["mean"] == pytest.approx(cost_at(mean_pts, 0.945)) == pytest.approx(2.0)


def test_no_seed_picks_its_own_knob() -> None:
    # The review's counterexample: knobs costing 10 / 12 / 14, each reaching 0.99 on one seed only
    # (mean attainment 0.978 at every knob). Each seed's own envelope reaches 0.99 - at a different
    # knob - so a mean of per-seed envelope costs published 11.6; no single setting reaches it.
    seeds_att = [[0.995, 0.97, 0.97], [0.97, 0.995, 0.97], [0.97, 0.97, 0.995]]  # per knob, per seed
    mean_pts = [(c, sum(a) / 3) for c, a in zip((10.0, 12.0, 14.0), seeds_att)]
    got, per_seed = cost_at_with_ci(mean_pts, [[10.0] * 3, [12.0] * 3, [14.0] * 3], 0.99)
    assert got is None and per_seed == []


def test_not_reached_by_the_mean_envelope_and_non_finite_points_left_out() -> None:
    assert cost_at_with_ci([(1.0, 0.9)], [[1.0]], 0.999) == (None, [])
    one, _ = cost_at_with_ci([(1.0, 0.9), (3.0, 0.99)], [[1.0], [3.0]], 0.99)  # one seed: no interval
    assert one == {"mean": 3.0, "ci95": None}
    # a NaN attainment at the cheapest point no longer hides the rest of the envelope
    assert cost_at([(1.0, math.nan), (2.0, 0.95), (3.0, 0.999)], 0.99) == pytest.approx(2.0 + 0.04 / 0.049)


def test_intervals_are_clipped_to_the_quantity_range() -> None:
    # attainments 0.99 and 1.0: mean 0.995, h = 12.706 x 0.00707 / 1.414 = 0.0635 -> [0.9315, 1.0]
    got = mean_ci([0.99, 1.0], 0.0, 1.0)
    assert got["mean"] == pytest.approx(0.995)
    assert got["ci95"] == pytest.approx([0.995 - 12.706 * 0.005, 1.0])
