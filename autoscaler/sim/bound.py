"""A provable lower bound on the GPU-hours any autoscaler needs to reach an SLO attainment.

The fluid window bound. It ignores what new capacity costs before it serves; each seed's
published bound (`experiment.bound_of`) is the larger of this one and the lead-time bound
(`autoscaler.sim.lead_bound`), which charges model load, node provisioning and the node tail. Notation: a slice [0, T] of N requests (every request of the slice,
failed ones included); request i arrives at a_i with n_in prompt and n_out output tokens.

Facts it rests on (each is a property of the simulated system, not an assumption about a policy):

1. *Deadline.* A request meets the SLO only if its TTFT <= b_i (the scenario's TTFT bound,
   `Slo.ttft_bound_s` semantics: max(ttft_s, ttft_idle_factor x idle TTFT of its prompt) when
   the factor is set, else ttft_s) and its TPOT <= tpot_s, i.e. it finishes by
   d_i = a_i + b_i + (n_out - 1) x tpot_s. All of its GPU work happens inside [a_i, d_i].
2. *Work.* Any schedule of the engine spends at least w_i = `Profile.work_lower_bound_s(n_in,
   n_out)` replica-seconds of GPU time on request i (proved there).
3. *Capacity.* A replica does at most one replica-second of work per second, and only while it
   is billed (a pod is billed from scheduling to removal, before it can serve).
4. *Floor.* Every policy keeps at least `min_replicas` pods scheduled at all times (the
   simulator starts with a ready fleet of >= min_replicas and every policy clamps to it).
5. *Billing ends at T.* GPU time after T is not billed, so a request with d_i > T may be served
   for free after T: it is ignored (it can only make the bound smaller).

Claim. Partition [0, T] into consecutive windows of length W (the last may be shorter). For a
window [s, e), let work_w = sum of w_i over the requests with s <= a_i and d_i <= e (the window
holds their whole feasible interval) and floor_w = min_replicas x (e - s). If every request
meets the SLO, the replica-seconds billed in the window are >= max(floor_w, work_w): by (4) at
least floor_w, and by (1)-(3) the work of the contained requests is done by billed replicas
inside the window. Windows are disjoint, so billed replica-seconds >= sum_w max(floor_w, work_w)
=: total_W.

At attainment a, at most k = floor((1 - a) x N) requests miss. A missing request may do no work
at all; removing request i from its window lowers max(floor_w, work_w) by at most w_i (for
d >= 0, max(F, x - d) >= max(F, x) - d), and never below floor_w. Hence, with top_W(k) the sum of
the k largest w_i among window-contained requests,

    billed replica-seconds >= B_W(k) = max(sum_w floor_w, total_W - top_W(k)).

Every W gives a valid bound, so max_W B_W(k) is one too. GPU-hours = replica-seconds x
gpus_per_replica / 3600; node GPU-hours >= pod GPU-hours >= this bound.

In the simulator. The engine accounts a replica's work per tick of `dt` (at most dt of it a
tick) and starts a prefill no earlier than the request's arrival; windows whose length is a
whole number of ticks are unions of ticks, so the argument holds tick by tick. Only such
windows are used (`tick_s`), plus the whole slice. The bound is loose where batching is: w_i
charges a decode step's base cost shared by a full batch of `max_num_seqs`, which no TPOT
target forces a fleet to reach; it is a floor no schedule can beat, not an estimate of cost.

Across seeds, and for means. Each seed s has its own arrivals (rate scaling and ServeGen draw
them), so its own bound B_s(k). `bound_curve` evaluates, on a fixed attainment grid A_j,
L_j = min_s B_s(floor((1 - A_j) N_s)); B_s is nondecreasing in a, so the step function
S(a) = L_j on [A_j, A_{j+1}) is below every B_s. `LowerBound` is the lower convex envelope of S
(the hull of its step corners (A_0, L_0), (A_{j+1}, L_j)): convex, piecewise linear and below
every seed's bound. Being convex, it is also below a MEAN over seeds: mean_s cost_s >=
mean_s C(a_s) >= C(mean_s a_s) (Jensen), so a point of the published table (means over seeds)
and the linear interpolation between such points (a frontier) are never below it.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Final

import numpy as np
import numpy.typing as npt

F = npt.NDArray[np.float64]
I = npt.NDArray[np.int64]

WINDOWS_S: Final = (10.0, 30.0, 60.0, 300.0, 3600.0)
"""Window lengths tried (the whole slice is always tried too)."""
GRID_STEP: Final = 0.0005
"""Attainment grid of the curve: 0, 0.0005, ..., 1 (the targets 0.90, 0.95, 0.99 are on it)."""


def deadlines(arrival: F, n_out: I, ttft_bound_s: F, tpot_s: float) -> F:
    """d_i = a_i + TTFT bound_i + (n_out - 1) x tpot_s: the last moment request i may finish."""
    steps = np.maximum(n_out.astype(np.float64) - 1.0, 0.0)
    out: F = arrival + ttft_bound_s + steps * tpot_s
    return out


def window_bound(arrival: F, deadline: F, work: F, horizon_s: float, window_s: float,
                 min_replicas: int, ks: I) -> F:
    """B_W(k) in replica-seconds for each k of `ks` (see the module docstring)."""
    n_win = max(1, int(math.ceil(horizon_s / window_s - 1e-9)))
    edges = np.minimum(np.arange(n_win + 1, dtype=np.float64) * window_s, horizon_s)
    floors = min_replicas * np.diff(edges)
    w_arr = np.minimum(np.floor(arrival / window_s).astype(np.int64), n_win - 1)
    inside = (deadline <= horizon_s) & (deadline <= edges[w_arr + 1]) & (arrival >= 0.0)
    per_win = np.bincount(w_arr[inside], weights=work[inside], minlength=n_win)
    total = float(np.maximum(floors, per_win).sum())
    contained = np.sort(work[inside])[::-1]
    top = np.concatenate(([0.0], np.cumsum(contained)))
    dropped = top[np.minimum(ks, contained.size)]
    out: F = np.maximum(float(floors.sum()), total - dropped)
    return out


def replica_seconds_bound(arrival: F, deadline: F, work: F, horizon_s: float, min_replicas: int, ks: I,
                          windows_s: Iterable[float] = WINDOWS_S, tick_s: float | None = None) -> F:
    """max over W (the given windows that are whole ticks, and the whole slice) of B_W(k),
    replica-seconds, per k."""
    sizes = sorted({w for w in windows_s if 0.0 < w < horizon_s and _whole_ticks(w, tick_s)} | {horizon_s})
    best = np.zeros(ks.size)
    for w in sizes:
        best = np.maximum(best, window_bound(arrival, deadline, work, horizon_s, w, min_replicas, ks))
    return best


def _whole_ticks(window_s: float, tick_s: float | None) -> bool:
    if tick_s is None:
        return True
    n = window_s / tick_s
    return abs(n - round(n)) < 1e-9 * max(1.0, n)


def attainment_grid() -> F:
    return np.round(np.arange(0, int(round(1 / GRID_STEP)) + 1) * GRID_STEP, 10)


def allowed_misses(grid: F, n_requests: int) -> I:
    """k = floor((1 - a) N) at each attainment of `grid` (rounded first: 1 - 0.99 is not 0.01)."""
    out: I = np.floor(np.round((1.0 - grid) * n_requests, 6)).astype(np.int64)
    return out


def seed_bound(arrival: F, n_out: I, work: F, ttft_bound_s: F, tpot_s: float, horizon_s: float,
               min_replicas: int, gpus_per_replica: int, grid: F | None = None, tick_s: float | None = None) -> F:
    """One seed's bound in GPU-hours at every attainment of `grid` (default `attainment_grid()`)."""
    g = attainment_grid() if grid is None else grid
    d = deadlines(arrival, n_out, ttft_bound_s, tpot_s)
    ks = allowed_misses(g, arrival.size)
    rs = replica_seconds_bound(arrival, d, work, horizon_s, min_replicas, ks, tick_s=tick_s)
    out: F = rs * gpus_per_replica / 3600.0
    return out


@dataclass(frozen=True)
class LowerBound:
    """A convex, nondecreasing piecewise-linear lower bound: GPU-hours at attainment a."""

    a: tuple[float, ...]
    gpu_hours: tuple[float, ...]

    def at(self, attainment: float) -> float:
        return float(np.interp(attainment, self.a, self.gpu_hours))

    def cost_at(self, targets: Sequence[float]) -> dict[str, float]:
        return {f"{t:g}": self.at(t) for t in targets}


def combine(grid: F, per_seed: Sequence[F]) -> LowerBound:
    """The lower convex envelope of the step function min over seeds (module docstring)."""
    low = np.min(np.vstack(per_seed), axis=0) if per_seed else np.zeros(grid.size)
    xs = np.concatenate(([grid[0]], grid[1:]))
    ys = np.concatenate(([low[0]], low[:-1]))
    hx, hy = lower_hull(xs, ys)
    return LowerBound(tuple(float(x) for x in hx), tuple(float(y) for y in hy))


def lower_hull(xs: F, ys: F) -> tuple[list[float], list[float]]:
    """Lower convex hull of points sorted by x (Andrew's monotone chain), as vertex lists."""
    hx: list[float] = []
    hy: list[float] = []
    for x, y in zip(xs.tolist(), ys.tolist()):
        while len(hx) >= 2 and (hx[-1] - hx[-2]) * (y - hy[-2]) - (hy[-1] - hy[-2]) * (x - hx[-2]) <= 0.0:
            hx.pop()
            hy.pop()
        hx.append(x)
        hy.append(y)
    return hx, hy
