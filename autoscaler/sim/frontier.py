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
* **Published value.** Per seed s, `cost_at` on the envelope of that seed's own points, c_s;
  the published value is their mean, with n seeds and h = t(0.975, n - 1) x sd(c_1..c_n) /
  sqrt(n) (sample sd, Student t) its interval [mean - h, mean + h] (low end clipped at 0; None
  for n < 2). A target is reached only when every seed's envelope reaches it: otherwise the
  value is None, and the per-seed costs say how many seeds did. (Until 2026-12-05 the value was
  the cost on the envelope of the mean points with this interval centred on it: two different
  statistics, and where attainment is noisy across seeds near the target the value sat above
  every c_s, so its interval could exclude all of them.)
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


def envelope(points: Sequence[tuple[float, float]]) -> list[tuple[float, float]]:
    """The monotone lower envelope of (cost, attainment) points, cheapest first."""
    out: list[tuple[float, float]] = []
    for cost, att in sorted(points, key=lambda p: (p[0], -p[1])):
        if not out or att > out[-1][1]:
            out.append((cost, att))
    return out


def cost_at(points: Sequence[tuple[float, float]], target: float) -> float | None:
    """Cost where the envelope of `points` reaches attainment `target` (module docstring)."""
    env = envelope(points)
    for i, (cost, att) in enumerate(env):
        if att >= target:
            if i == 0:
                return cost
            c0, a0 = env[i - 1]
            return c0 + (target - a0) / (att - a0) * (cost - c0)
    return None


def cost_at_with_ci(seed_points: Sequence[Sequence[tuple[float, float]]],
                    target: float) -> tuple[dict[str, float | list[float] | None] | None, list[float | None]]:
    """({mean, ci95} of the per-seed costs at `target`, or None unless every seed reaches it; the
    per-seed costs c_s, None where a seed's envelope misses it) (module docstring).

    Worked example: seeds' costs at 0.99 of 2.8 and 3.2 -> mean 3.0, h = 12.706 x 0.2828 /
    sqrt(2) = 2.54, [0.46, 5.54]; a seed that reaches 0.985 only -> (None, [2.8, None])."""
    per_seed = [cost_at(pts, target) for pts in seed_points]
    reached = [c for c in per_seed if c is not None]
    if not per_seed or len(reached) < len(per_seed):
        return None, per_seed
    cell = mean_ci(reached, 0.0)
    return cell, per_seed
