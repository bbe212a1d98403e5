"""A policy's cost frontier: node GPU-hours against SLO attainment over its grid points.

Definitions (docs/benchmark.md):

* **Envelope.** Of points (cost, attainment), the monotone lower envelope keeps, in order of
  increasing cost, each point whose attainment is higher than that of every cheaper point (a
  point that costs more and attains no more than another is dominated). Ties in cost keep the
  higher attainment. The envelope is the polyline through the kept points; attainment rises
  with cost along it.
* **Cost at a target t.** On the envelope, the cost where attainment reaches t, linearly
  interpolated between the two kept points around it; the cheapest kept point's cost when it
  already reaches t (no extrapolation below the grid); None when no point reaches t.
* **Operating point.** Where the envelope of the MEAN points (mean over seeds of cost and of
  attainment, per grid point) reaches t: one setting anyone could deploy, the mixture (1 - w) x
  point i + w x point j of the two envelope points around t (w = (t - a_i) / (a_j - a_i) on the
  means), or the cheapest envelope point when it already reaches t. None when the mean envelope
  misses t.
* **Published value and interval.** Each seed's cost at that same operating point, c_s = (1 - w)
  x cost_s(i) + w x cost_s(j); the value is their mean (= the mean envelope's cost at t) and, with
  n seeds and h = t(0.975, n - 1) x sd(c_1..c_n) / sqrt(n), the interval is [mean - h, mean + h]
  (low end clipped at 0; None for n < 2). One estimator, its value and its spread over seeds.
  Before 2026-12-05 the interval came from each seed's own envelope, another statistic, and could
  exclude every seed; the next version took the mean of those per-seed envelope costs, which lets
  each seed pick its own knob: optimistic (a review built three knobs none of which reaches 99 %
  on average, yet every seed's own envelope did, at three different knobs).
* **Points.** Mean and Student-t interval over seeds, clipped to the quantity's range
  (attainment within [0, 1], GPU-hours and scale actions >= 0).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Final

# two-sided 95 % Student t quantiles t(0.975, df), df = 1 .. 30; beyond: 1.96
_T975: Final = (12.706, 4.303, 3.182, 2.776, 2.571, 2.447, 2.365, 2.306, 2.262, 2.228, 2.201, 2.179, 2.160, 2.145,
                2.131, 2.120, 2.110, 2.101, 2.093, 2.086, 2.080, 2.074, 2.069, 2.064, 2.060, 2.056, 2.052, 2.048,
                2.045, 2.042)


def t975(df: int) -> float:
    if df < 1:
        raise ValueError(f"t quantile: df = {df} must be >= 1")
    return _T975[df - 1] if df <= len(_T975) else 1.96


def half_width(values: Sequence[float]) -> float | None:
    """Student-t 95 % half-width of the mean of `values`; None for fewer than 2 values."""
    n = len(values)
    if n < 2:
        return None
    m = sum(values) / n
    sd = math.sqrt(sum((v - m) ** 2 for v in values) / (n - 1))
    return t975(n - 1) * sd / math.sqrt(n)


def mean_ci(values: Sequence[float], lo: float = -math.inf,
            hi: float = math.inf) -> dict[str, float | list[float] | None]:
    """{mean, ci95: [low, high] or None} of per-seed values; the interval is clipped to the
    quantity's range [lo, hi] (an attainment interval never passes 100 %)."""
    m = sum(values) / len(values)
    h = half_width(values)
    return {"mean": m, "ci95": None if h is None else [max(m - h, lo), min(m + h, hi)]}


def envelope_indices(points: Sequence[tuple[float, float]]) -> list[int]:
    """The indices of the points on the monotone lower envelope of (cost, attainment) points,
    cheapest first; a point with a non-finite cost or attainment is left out."""
    finite = [i for i, (c, a) in enumerate(points) if math.isfinite(c) and math.isfinite(a)]
    out: list[int] = []
    for i in sorted(finite, key=lambda k: (points[k][0], -points[k][1])):
        if not out or points[i][1] > points[out[-1]][1]:
            out.append(i)
    return out


def envelope(points: Sequence[tuple[float, float]]) -> list[tuple[float, float]]:
    """The monotone lower envelope of (cost, attainment) points, cheapest first."""
    return [points[i] for i in envelope_indices(points)]


def operating_point(points: Sequence[tuple[float, float]], target: float) -> tuple[int, int, float] | None:
    """(i, j, w): where the envelope of `points` reaches `target`, the mixture (1 - w) x points[i]
    + w x points[j] (i = j, w = 0 at the cheapest envelope point when it already reaches it); None
    when no point reaches it. Worked example: (1, 0.80), (2, 0.95), (3, 0.99) at 0.97 -> (1, 2,
    0.5): cost 2.5."""
    env = envelope_indices(points)
    for n, j in enumerate(env):
        if points[j][1] >= target:
            if n == 0:
                return j, j, 0.0
            i = env[n - 1]
            a0, a1 = points[i][1], points[j][1]
            return i, j, (target - a0) / (a1 - a0)
    return None


def cost_at(points: Sequence[tuple[float, float]], target: float) -> float | None:
    """Cost where the envelope of `points` reaches attainment `target` (module docstring)."""
    op = operating_point(points, target)
    if op is None:
        return None
    i, j, w = op
    return points[i][0] + w * (points[j][0] - points[i][0])


def cost_at_with_ci(mean_points: Sequence[tuple[float, float]], seed_costs: Sequence[Sequence[float]],
                    target: float) -> tuple[dict[str, float | list[float] | None] | None, list[float]]:
    """({mean, ci95} of the seeds' costs at the mean envelope's operating point for `target`, or
    None when the mean envelope misses it; those per-seed costs) (module docstring).
    `seed_costs[k]` are grid point k's per-seed costs, in one seed order for every point.

    Worked example: mean points (1, 0.90), (3, 0.99); per seed costs (0.8, 1.2) and (2.8, 3.2) ->
    at 0.99 the operating point is point 1 -> c = 2.8, 3.2: mean 3.0, h = 12.706 x 0.2828 /
    sqrt(2) = 2.54; at 0.945: w = 0.5 -> c = 1.8, 2.2, mean 2.0 (the mean envelope's cost)."""
    op = operating_point(mean_points, target)
    if op is None:
        return None, []
    i, j, w = op
    per_seed = [a + w * (b - a) for a, b in zip(seed_costs[i], seed_costs[j])]
    if not per_seed or len(seed_costs[i]) != len(seed_costs[j]):  # not the same seeds: no interval
        return {"mean": mean_points[i][0] + w * (mean_points[j][0] - mean_points[i][0]), "ci95": None}, []
    return mean_ci(per_seed, 0.0), per_seed
