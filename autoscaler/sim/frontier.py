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
  attainment, per grid point) reaches t: the mixture (1 - w) x point i + w x point j of the two
  envelope points around t (in expectation: knob i for a fraction 1 - w of the time, knob j
  for the rest; the same mixture for every seed, so no seed picks its own knob) (w = (t - a_i) / (a_j - a_i) on the
  means), or the cheapest envelope point when it already reaches t. None when the mean envelope
  misses t.
* **Published value and interval.** The value is that operating point's cost (the mean
  envelope's). Its interval must hold both what a seed pays there and where it crosses the
  target: per seed, y_s = c_s - slope x (a_s - t), with c_s and a_s the seed's cost and
  attainment at the same mixture and slope = (C_j - C_i) / (A_j - A_i) on the means (0 at a
  single point), the delta-method linearization of "cost at t" (mean(y) is the value, because the
  mixture's mean attainment is t); then, with n seeds and h = t(0.975, n - 1) x sd(y) / sqrt(n),
  [value - h, value + h] (low end clipped at 0; None for n < 2). Without the attainment term a
  static fleet, whose cost per fleet is the same on every seed, had a zero-width interval (a
  review's simulation: 4 % coverage of the true cost at 99 %; ~96 % with it). Not covered: the
  choice of envelope points from noisy means, which biases the value low where a grid is flat
  near the target (docs/benchmark.md).
  History: before 2026-12-05 the interval came from each seed's own envelope, another statistic,
  which could exclude every seed; briefly the value was the mean of those per-seed envelope costs,
  which lets each seed pick its own knob and is optimistic (a review built three knobs none of
  which reaches 99 % on average, yet every seed's own envelope did, at a different knob).
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


def cost_at_with_ci(mean_points: Sequence[tuple[float, float]], seed_points: Sequence[Sequence[tuple[float, float]]],
                    target: float) -> tuple[dict[str, float | list[float] | None] | None, list[float], list[float]]:
    """(`{mean, ci95}` of cost at `target` on the mean envelope, or None when it misses it; the
    seeds' linearized values y_s; each seed's attainment at the operating point) (module docstring).
    `seed_points[k]` are grid point k's per-seed (cost, attainment), in one seed order for every point.

    y_s = c_s - slope x (a_s - target), with c_s and a_s the seed's cost and attainment at the
    operating point (the mixture of points i and j at weight w) and slope = (C_j - C_i) / (A_j -
    A_i) on the means (0 at a single point): a seed that attains more there would have reached the
    target for less. mean(y) is the published value (the mixture's mean attainment is the target).

    Worked example: mean points (1, 0.90), (3, 0.99); seeds (0.8, 0.88) / (1.2, 0.92) at point 0
    and (3, 0.98) / (3, 1.0) at point 1 -> at 0.99, i = j = 1: y = 3, 3 (slope 0), [3, 3]; at
    0.945, w = 0.5, slope 2 / 0.09 = 22.2: c = 1.9, 2.1, a = 0.93, 0.96 -> y = 1.9 + 22.2 x 0.015
    = 2.233 and 2.1 - 22.2 x 0.015 = 1.767, mean 2.0 (the envelope's cost), h = 12.706 x 0.33 /
    sqrt(2) = 2.96: the seeds' spread in where they cross the target, not only in what they pay."""
    op = operating_point(mean_points, target)
    if op is None:
        return None, [], []
    i, j, w = op
    value = mean_points[i][0] + w * (mean_points[j][0] - mean_points[i][0])
    if not seed_points[i] or len(seed_points[i]) != len(seed_points[j]):  # not the same seeds: no interval
        return {"mean": value, "ci95": None}, [], []
    slope = 0.0 if i == j else (mean_points[j][0] - mean_points[i][0]) / (mean_points[j][1] - mean_points[i][1])
    costs = [(1 - w) * a[0] + w * b[0] for a, b in zip(seed_points[i], seed_points[j])]
    atts = [(1 - w) * a[1] + w * b[1] for a, b in zip(seed_points[i], seed_points[j])]
    ys = [c - slope * (a - target) for c, a in zip(costs, atts)]
    cell = mean_ci(ys, 0.0)
    return cell, ys, atts
