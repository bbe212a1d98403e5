"""A lower bound on node GPU-hours that charges what new capacity costs before it serves.

The fluid window bound (`autoscaler.sim.bound`) lets capacity appear the moment work does. No
policy can: a pod serves only after its model load, on a node that was provisioned first and
that the cluster-autoscaler keeps for 10 minutes after its last pod. On bursty traffic that is
most of the cost (azure-code: a static fleet needs 3.5 x the busiest minute). This bound keeps
the fluid bound's facts and adds the lifecycle, as one linear program per seed.

Notation: ticks of `dt`; windows of W (a whole number of ticks, aligned at 0; the last may be
shorter), window w has length len_w. x(t): pods able to work in the tick of t (ready or
draining); M(t): ready nodes; c = gpus_per_node / gpus_per_replica pods a node.

Facts (each a property of the simulator, `autoscaler.sim.cluster` and `.startup`):

1. *Work, per piece.* Request i (arrival a_i, TTFT bound b_i, deadline d_i as in `bound`) meets
   the SLO only if its prefill (`Profile.prefill_s(n_in)`, charged before its first token) is
   done in [a_i, a_i + b_i] and the rest of `work_lower_bound_s` in [a_i, d_i]. A piece whose
   due time is after T is left out (work after T is not billed).
2. *Capacity.* A pod does at most one replica-second of work per second while it can work. So
   for every interval I of whole windows: sum_{w in I} len_w x_w >= the work of the pieces that
   start and are due inside I (x_w: the mean of x over window w). Every policy keeps
   x >= min_replicas.
3. *Load.* A pod starts to work at least `load_min_s` after it is scheduled, on a ready node,
   and x rises only when a pod becomes ready. The warm fleet of t = 0 is free (a static fleet
   starts at its size). Up-crossings: sum of positive steps of the window means x_w (from
   the first window on) <= the number of pods that became ready (lemma below). So the ready
   nodes carry the working pods and the loading ones:
   c x sum_w len_w M_w >= sum_w len_w x_w + load_min_s x sum_w max(0, x_w - x_{w-1}).
4. *Node tail.* A node that held a working pod at s is not removed before s + idle_remove_s
   (cluster-autoscaler's --scale-down-unneeded-time, counted from its last pod's removal). So
   M(t) >= x(s) / c for s in [t - idle_remove_s, t]; with windows: M_w >= x_w / c and
   M_w >= x_v / c for every window v that ends before w starts and starts after
   e_w - idle_remove_s.
5. *Provisioning.* A node requested during the slice is billed from the request and ready at
   least `provision_min_s` later; M rises only when a node becomes ready (warm nodes free).

Claim. Every schedule meeting the SLO for all but k requests bills at least
gpus_per_node x (sum_w len_w M_w + provision_min_s x sum_w max(0, M_w - M_{w-1})) GPU-seconds
of nodes, for the window means x_w, M_w of its own x(t), M(t): by 5 the node time is the ready
time plus each new node's provisioning; 1-4 are constraints those means satisfy once the missed
requests' pieces are removed. The LP below minimises that cost over all x, M satisfying them
(and over fractional sets of missed requests), so its optimum is no higher.

Lemma (up-crossings). For an integer step function f and consecutive windows with means m_w,
sum_w max(0, m_{w+1} - m_w) <= the number of unit up-steps of f. Proof: f = integral over levels
of 1{f > l}; the positive part is subadditive, so it suffices to show it per level; there the
means are the share of each window inside a union of disjoint intervals, each a unimodal
sequence whose positive variation is 0 for an interval starting at 0 and at most 1 for one that
starts with an up-step.

Misses. At most k requests may miss. A missed request need do no work: the LP may remove work z_g
from a group g of pieces (same start window, same due window, the request's total work within
a factor `BUCKET_RATIO`), at a budget cost of z_g / (the largest total work in g); the budget is
k. Removing a whole request i costs at most p_i / w_i + (w_i - p_i) / w_i = 1, so every real set
of k misses is a feasible point: the relaxation is a lower bound.

Value as a function of k. The LP optimum V(k) is convex and non-increasing in k; at attainment a
a run misses at most floor((1 - a) N) <= (1 - a) N requests. Solving at a few attainments gives
V and its slope (the budget row's dual); each tangent V(k_j) + slope_j x ((1 - a) N - k_j) is
below V everywhere, so the per-seed curve, the largest tangent at each a, is a lower bound at
every a. HiGHS solves to a relative tolerance; values and slopes are shrunk by
`SOLVER_MARGIN` for it.
"""

from __future__ import annotations

import math
import os
import sys
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Final

import highspy
import numpy as np
import numpy.typing as npt

F = npt.NDArray[np.float64]
I = npt.NDArray[np.int64]

MAX_WINDOWS: Final = 1800
"""Windows per slice at most: W = the smallest whole number of ticks with T / W <= this (2 s for an
hour at dt 1-2 s, 48 s for a day at dt 2 s)."""
SHORT_INTERVALS_S: Final = 30.0
"""Every interval of consecutive windows up to this long is a constraint (at least one window)."""
BLOCKS_S: Final = (300.0, 3600.0)
"""Aligned blocks of these lengths are constraints too, and so is the whole slice."""
BUCKET_RATIO: Final = 1.25
"""Pieces are grouped by their request's total work within this factor (the miss budget's unit)."""
TARGETS: Final = (0.9, 0.95, 0.97, 0.99, 0.995, 0.999, 1.0)
"""Attainments at which the LP is solved; its tangents bound every other one. Below 0.9 the
fluid bound (and the tangent at 0.9) take over: there the LP sits at the min_replicas floor,
where HiGHS is slowest (103 s at 0.5 on a ServeGen day against 3 s at 0.9)."""
SOLVER_MARGIN: Final = 1e-6
"""Relative margin taken off every solved value for the solver's tolerance."""


@dataclass(frozen=True)
class Lifecycle:
    """What new capacity costs before it serves, in the simulated cluster (facts 3-5)."""

    load_min_s: float  # least pod scheduled -> ready
    provision_min_s: float  # least node requested -> ready
    idle_remove_s: float  # a node stays this long after its last pod
    pods_per_node: int
    gpus_per_node: int
    min_replicas: int


@dataclass(frozen=True)
class Pieces:
    """Work that must be done inside [window `start`, window `end`], per piece (fact 1)."""

    start: I
    end: I
    work: F
    request_work: F  # the whole request's work (the miss budget's unit)


@dataclass(frozen=True)
class Windows:
    width_s: float
    lengths: F  # len_w (the last may be shorter)

    @property
    def n(self) -> int:
        return int(self.lengths.size)

    @staticmethod
    def of(horizon_s: float, tick_s: float) -> Windows:
        """W = tick x ceil(T / MAX_WINDOWS / tick). Example: T = 3,600 s, tick 1 s -> W = 2 s,
        1,800 windows; T = 86,400 s, tick 2 s -> W = 48 s, 1,800 windows."""
        width = tick_s * max(1, math.ceil(horizon_s / MAX_WINDOWS / tick_s - 1e-9))
        n = max(1, math.ceil(horizon_s / width - 1e-9))
        edges = np.minimum(np.arange(n + 1, dtype=np.float64) * width, horizon_s)
        return Windows(width, np.diff(edges))


def pieces(arrival: F, first_due: F, last_due: F, prefill: F, work: F, windows: Windows,
           horizon_s: float) -> Pieces:
    """Prefill pieces (due at first_due = a + b) and decode pieces (the rest of `work`, due at
    last_due = d), each kept when due by T and of positive work; a piece due at time u belongs
    to windows floor(a / W) .. floor(u / W) (the later window when u is on an edge)."""
    n, width = windows.n, windows.width_s
    start = np.minimum(np.floor(arrival / width).astype(np.int64), n - 1)
    parts = [(first_due, np.minimum(prefill, work)), (last_due, work - np.minimum(prefill, work))]
    s, e, w, tot = [], [], [], []
    for due, part in parts:
        keep = (due <= horizon_s) & (part > 0.0) & (arrival >= 0.0)
        s.append(start[keep])
        e.append(np.minimum(np.floor(due[keep] / width).astype(np.int64), n - 1))
        w.append(part[keep])
        tot.append(work[keep])
    return Pieces(np.concatenate(s), np.concatenate(e), np.concatenate(w), np.concatenate(tot))


@dataclass(frozen=True)
class Groups:
    """Pieces with the same start and end window and request work within BUCKET_RATIO (sorted
    by `key`, which encodes the three)."""

    key: I
    start: I
    end: I
    work: F
    largest: F  # the largest request work in the group


BUCKETS: Final = 512  # request-work buckets: BUCKET_RATIO^(b - BUCKET_OFFSET), 1e-12 .. 1e34 s
BUCKET_OFFSET: Final = 130
BLOCK: Final = 1 << 21
"""Requests grouped at a time (`request_groups`): a ServeGen day holds 34 M of them."""


def groups(p: Pieces, n_windows: int) -> Groups:
    """The pieces of `p` in groups; key = (start x n_windows + end) x BUCKETS + bucket.

    Worked example: n_windows 10, pieces (start 1, end 2, work 4 of a request of 10) and
    (1, 2, 1 of 8): buckets floor(log_1.25 10) = 10 and floor(log_1.25 8) = 9 differ: two
    groups. Of 10 and 11 (bucket 10 both): one group of work 5, largest 11."""
    bucket = np.floor(np.log(np.maximum(p.request_work, 1e-12)) / math.log(BUCKET_RATIO)).astype(np.int64)
    bucket = np.clip(bucket + BUCKET_OFFSET, 0, BUCKETS - 1)
    return _reduce((p.start * n_windows + p.end) * BUCKETS + bucket, p.work, p.request_work, n_windows)


def merge(parts: Sequence[Groups], n_windows: int) -> Groups:
    """Groups of several blocks of requests as one: equal keys summed (work) and maximised."""
    if len(parts) == 1:
        return parts[0]
    return _reduce(np.concatenate([g.key for g in parts]), np.concatenate([g.work for g in parts]),
                   np.concatenate([g.largest for g in parts]), n_windows)


def _reduce(key: I, work: F, largest: F, n_windows: int) -> Groups:
    keys, inv = np.unique(key, return_inverse=True)
    top = np.zeros(keys.size)
    np.maximum.at(top, inv, largest)
    total = np.bincount(inv, weights=work, minlength=keys.size).astype(np.float64)
    pair = keys // BUCKETS
    return Groups(keys.astype(np.int64), (pair // n_windows).astype(np.int64), (pair % n_windows).astype(np.int64),
                  total, top)


def request_groups(arrival: F, first_due: F, last_due: F, prefill: F, work: F, windows: Windows,
                   horizon_s: float) -> Groups:
    """`groups(pieces(...))` of every request, BLOCK requests at a time (the temporaries of a
    whole ServeGen day would take gigabytes)."""
    parts = []
    for i in range(0, max(arrival.size, 1), BLOCK):
        b = slice(i, i + BLOCK)
        p = pieces(arrival[b], first_due[b], last_due[b], prefill[b], work[b], windows, horizon_s)
        parts.append(groups(p, windows.n))
    return merge(parts, windows.n)


def intervals(windows: Windows) -> tuple[I, I]:
    """Constraint intervals [first, last] (window indices): every run of up to SHORT_INTERVALS_S
    (at least one window), aligned BLOCKS_S blocks, the whole slice. Short runs come first,
    ordered by length then start (`short_row`)."""
    n, m = windows.n, short_count(windows)
    first = [np.arange(0, n - ln + 1) for ln in range(1, m + 1)]
    last = [f + ln - 1 for ln, f in zip(range(1, m + 1), first)]
    for block in BLOCKS_S:
        k = int(round(block / windows.width_s))
        if m < k < n:
            f = np.arange(0, n, k)
            first.append(f)
            last.append(np.minimum(f + k, n) - 1)
    if n > m:
        first.append(np.array([0]))
        last.append(np.array([n - 1]))
    return np.concatenate(first).astype(np.int64), np.concatenate(last).astype(np.int64)


def short_count(windows: Windows) -> int:
    return max(1, min(windows.n, int(SHORT_INTERVALS_S // windows.width_s)))


def short_row(start: I, length: int, n: int) -> I:
    """Row of the short interval [start, start + length - 1]: rows of shorter runs come first."""
    before = sum(n - ln + 1 for ln in range(1, length))
    out: I = before + start
    return out


def incidence(g: Groups, windows: Windows) -> tuple[I, I]:
    """(row, group) pairs: each constraint interval of `intervals` with each group inside it."""
    n, m = windows.n, short_count(windows)
    span = g.end - g.start + 1
    rows: list[I] = []
    cols: list[I] = []
    for length in range(1, m + 1):
        for off in range(length):
            j = g.start - off  # [j, j + length - 1] holds [start, end] iff j <= start, j + length - 1 >= end
            ok = np.nonzero((span <= length) & (j >= 0) & (j + length - 1 >= g.end) & (j + length - 1 <= n - 1))[0]
            rows.append(short_row(j[ok], length, n))
            cols.append(ok)
    row = sum(n - ln + 1 for ln in range(1, m + 1))
    for block in BLOCKS_S:
        k = int(round(block / windows.width_s))
        if m < k < n:
            ok = np.nonzero(g.start // k == g.end // k)[0]
            rows.append(row + g.start[ok] // k)
            cols.append(ok)
            row += math.ceil(n / k)
    if n > m:
        rows.append(np.full(g.start.size, row, dtype=np.int64))
        cols.append(np.arange(g.start.size))
    return np.concatenate(rows).astype(np.int64), np.concatenate(cols).astype(np.int64)


class Rows:
    """The constraint matrix as triplets, one block of rows at a time (`lower <= A y <= upper`)."""

    def __init__(self, n_cols: int) -> None:
        self.n_cols = n_cols
        self.n_rows = 0
        self._r: list[I] = []
        self._c: list[I] = []
        self._v: list[F] = []
        self.upper: list[F] = []

    def add(self, n: int, entries: Sequence[tuple[I, I, F]], upper: F | float = 0.0) -> int:
        """Append n rows `sum entries <= upper` (entry rows are 0 .. n - 1 of the block); returns
        the first row's index."""
        first = self.n_rows
        for r, c, v in entries:
            self._r.append(np.asarray(r, dtype=np.int64) + first)
            self._c.append(np.asarray(c, dtype=np.int64))
            self._v.append(np.asarray(v, dtype=np.float64))
        self.upper.append(np.broadcast_to(np.asarray(upper, dtype=np.float64), (n,)).copy())
        self.n_rows += n
        return first

    def steps(self, n: int, level: int, up: int) -> None:
        """level_w - level_{w-1} - up_w <= 0, w = 1 .. n - 1 (up_w is column up + w - 1)."""
        w = np.arange(1, n)
        one = np.ones(n - 1)
        self.add(n - 1, [(w - 1, level + w, one), (w - 1, level + w - 1, -one), (w - 1, up + w - 1, -one)])

    def at_least(self, lower: I, upper: I, coef: float = 1.0) -> None:
        """coef x y[lower] - y[upper] <= 0, one row per pair."""
        r = np.arange(lower.size)
        self.add(lower.size, [(r, lower, np.full(lower.size, coef)), (r, upper, -np.ones(lower.size))])

    def colwise(self) -> tuple[I, I, F]:
        """(start, index, value) of the matrix by columns, as HiGHS takes it."""
        r, c, v = np.concatenate(self._r), np.concatenate(self._c), np.concatenate(self._v)
        order = np.lexsort((r, c))
        start = np.concatenate(([0], np.cumsum(np.bincount(c, minlength=self.n_cols)))).astype(np.int64)
        return start, r[order], v[order]


@dataclass(frozen=True)
class Program:
    """The LP (minimise cost . y subject to A y <= upper, lower_y <= y <= upper_y); the miss
    budget is row `budget_row`."""

    rows: Rows
    cost: F
    col_lower: F
    col_upper: F
    budget_row: int
    scale: float  # objective units (node-seconds) -> GPU-hours


def program(g: Groups, windows: Windows, life: Lifecycle) -> Program:
    """Columns: x (n), u (n - 1, x's up-steps), z (one per group), M (n), v (n - 1, M's
    up-steps), then the sliding-maximum levels of x (n each). See the module docstring.

    The tail (fact 4) asks M_w >= x_v / c for v in [w - K + 1, w - 1], K = floor(idle_remove_s /
    W): with p2 the largest power of two <= K - 1, level j >= x over the 2^(j + 1) windows ending
    at its own, so the top level at w - 1 and at w - K + p2 cover that range in two blocks of p2
    (K = 300 at W = 2 s: p2 = 256, 8 levels)."""
    n, ln = windows.n, windows.lengths
    first, last = intervals(windows)
    n_iv, n_g = first.size, g.work.size
    k_tail = int(life.idle_remove_s // windows.width_s)
    p2 = 1 << int(math.floor(math.log2(k_tail - 1))) if k_tail >= 2 else 0
    n_lev = int(math.log2(p2)) if p2 >= 2 else 0
    x0, u0, z0 = 0, n, 2 * n - 1
    m0 = z0 + n_g
    v0 = m0 + n
    h0 = v0 + n - 1
    rows = Rows(h0 + n_lev * n)
    # 1. work: -(sum len x + sum z) <= -(work of the groups inside)
    iv_len = last - first + 1
    iv_rows = np.repeat(np.arange(n_iv), iv_len)
    iv_cols = np.concatenate([np.arange(f, f + k) for f, k in zip(first.tolist(), iv_len.tolist())])
    gr, gc = incidence(g, windows)
    rows.add(n_iv, [(iv_rows, x0 + iv_cols, -ln[iv_cols]), (gr, z0 + gc, -np.ones(gr.size))],
             -np.bincount(gr, weights=g.work[gc], minlength=n_iv).astype(np.float64))
    # 2-3. up-steps of x and of M
    rows.steps(n, x0, u0)
    rows.steps(n, m0, v0)
    # 4. sliding maximum of x by doubling: level j is >= x over 2^(j+1) windows ending at w
    below = x0
    for j in range(n_lev):
        half, h = 1 << j, h0 + j * n
        w, sh = np.arange(n), np.arange(half, n)
        rows.at_least(np.concatenate([below + w, below + sh - half]), np.concatenate([h + w, h + sh]))
        below = h
    # 5. M >= x / c now and over the tail: M_w >= top_{w-1} / c and >= top_{w-K+p2} / c
    c = float(life.pods_per_node)
    w = np.arange(n)
    lo, hi = [x0 + w], [m0 + w]
    if p2 >= 1:
        a, b = np.arange(1, n), np.arange(max(0, k_tail - p2), n)
        lo += [below + a - 1, below + b - k_tail + p2]
        hi += [m0 + a, m0 + b]
    rows.at_least(np.concatenate(lo), np.concatenate(hi), 1.0 / c)
    # 6. loading: sum len x + load_min x sum u - c x sum len M <= 0
    zero_n, zero_u = np.zeros(n, dtype=np.int64), np.zeros(n - 1, dtype=np.int64)
    rows.add(1, [(zero_n, x0 + w, ln), (zero_u, u0 + np.arange(n - 1), np.full(n - 1, life.load_min_s)),
                 (zero_n, m0 + w, -c * ln)])
    # 7. the miss budget: sum z_g / largest_g <= k (set per solve)
    budget = rows.add(1, [(np.zeros(n_g, dtype=np.int64), z0 + np.arange(n_g), 1.0 / np.maximum(g.largest, 1e-300))])
    cost = np.zeros(rows.n_cols)
    cost[m0:m0 + n] = ln
    cost[v0:v0 + n - 1] = life.provision_min_s
    col_lower = np.zeros(rows.n_cols)
    col_lower[x0:x0 + n] = float(life.min_replicas)
    col_upper = np.full(rows.n_cols, np.inf)
    col_upper[z0:z0 + n_g] = g.work
    return Program(rows, cost, col_lower, col_upper, budget, life.gpus_per_node / 3600.0)


def silent_highs() -> highspy.Highs:
    """A HiGHS instance that prints nothing. The library prints its banner to file descriptor 1
    when the first instance of a process is made (in a sweep's worker: into the sweep's output),
    so fd 1 points at /dev/null for that moment."""
    sys.stdout.flush()
    saved = os.dup(1)
    try:
        with open(os.devnull, "wb") as null:
            os.dup2(null.fileno(), 1)
            h = highspy.Highs()  # type: ignore[no-untyped-call]
    finally:
        os.dup2(saved, 1)
        os.close(saved)
    h.silent()
    return h


class Solver:
    """One HiGHS model of a `Program`; each `solve` changes only the miss budget and starts from
    the last basis."""

    def __init__(self, prog: Program) -> None:
        self.prog = prog
        self.h = silent_highs()
        lp = highspy.HighsLp()
        lp.num_col_ = prog.rows.n_cols
        lp.num_row_ = prog.rows.n_rows
        lp.col_cost_ = prog.cost
        lp.col_lower_ = prog.col_lower
        lp.col_upper_ = np.where(np.isinf(prog.col_upper), highspy.kHighsInf, prog.col_upper)
        lp.row_lower_ = np.full(prog.rows.n_rows, -highspy.kHighsInf)
        lp.row_upper_ = np.concatenate(prog.rows.upper)
        start, index, value = prog.rows.colwise()
        lp.a_matrix_.format_ = highspy.MatrixFormat.kColwise
        lp.a_matrix_.start_ = start
        lp.a_matrix_.index_ = index
        lp.a_matrix_.value_ = value
        self.h.passModel(lp)

    def solve(self, misses: float) -> tuple[float, float]:
        """(V, dV/dk) in GPU-hours at a budget of `misses` requests, shrunk by SOLVER_MARGIN."""
        self.h.changeRowBounds(self.prog.budget_row, -highspy.kHighsInf, misses)
        self.h.run()
        status = self.h.getModelStatus()
        if status != highspy.HighsModelStatus.kOptimal:
            raise RuntimeError(f"lead-time bound: HiGHS ended with {self.h.modelStatusToString(status)}")
        value = float(self.h.getInfo().objective_function_value) * self.prog.scale * (1.0 - SOLVER_MARGIN)
        slope = float(self.h.getSolution().row_dual[self.prog.budget_row]) * self.prog.scale * (1.0 + SOLVER_MARGIN)
        return max(value, 0.0), min(slope, 0.0)


def curve(prog: Program, n_requests: int, grid: F, targets: Sequence[float] = TARGETS) -> F:
    """GPU-hours at every attainment of `grid`: the largest tangent of V at the `targets`
    (module docstring, "Value as a function of k"), never below 0."""
    solver = Solver(prog)
    k = (1.0 - grid) * n_requests
    out = np.zeros(grid.size)
    for t in sorted(targets, reverse=True):
        k_t = (1.0 - t) * n_requests
        value, slope = solver.solve(k_t)
        out = np.maximum(out, value + slope * (k - k_t))
    return out
