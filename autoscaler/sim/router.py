"""The router in front of the replicas: least outstanding requests, optionally capped per pod.

* `water_fill(load, n, rng, limit)` - how many of n new requests each ready replica gets when each
  request goes to the replica with the fewest outstanding requests (engine waiting + running).
  Ties between equally loaded replicas are broken with `rng` (a run's seed decides them, so two
  seeds route differently and one seed always routes the same); without `rng`, the emptier /
  first replica wins, as before.
* `admit(load, n, limit)` - how many of n requests waiting in arrival order (FIFO) may be routed
  now when no replica may hold more than `limit` requests: the rest wait at the router. This is
  Knative's activator (and queue-proxy) enforcing `containerConcurrency`, and Ray Serve's
  handle holding requests beyond a replica's `max_ongoing_requests`
  (knative/serving pkg/activator/net/throttler.go; ray python/ray/serve/_private/router.py).

`autoscaler.sim.cluster.Cluster.route` calls both every tick.
"""

from __future__ import annotations

import numpy as np
import numpy.typing as npt

I = npt.NDArray[np.int64]


def room(load: I, limit: int | None) -> I | None:
    """Requests each replica may still take under `limit` (None: no limit)."""
    if limit is None:
        return None
    out: I = np.maximum(limit - load.astype(np.int64), 0)
    return out


def admit(load: I, n: int, limit: int | None) -> int:
    """How many of the n requests queued at the router (oldest first) go out now. Worked example:
    limit 4, loads [4, 1, 3]: room 0 + 3 + 1 = 4, so 4 of 6 go and 2 keep waiting."""
    free = room(load, limit)
    return n if free is None else min(n, int(free.sum()))


def _order(load: I, rng: np.random.Generator | None) -> I:
    """Replicas from the least to the most loaded; equal loads in random order (`rng`) or by index."""
    if rng is None:
        out: I = np.argsort(load, kind="stable").astype(np.int64)
        return out
    perm = rng.permutation(load.size)
    shuffled: I = perm[np.argsort(load[perm], kind="stable")].astype(np.int64)
    return shuffled


def water_fill(load: I, n: int, rng: np.random.Generator | None = None, limit: int | None = None) -> I:
    """How many of n new requests each replica gets when each goes to the replica with the fewest
    outstanding requests. Worked example: loads [5, 2, 3], 4 new: 2 -> 3, then 3 and 3 -> 4 and 4,
    then the fourth lifts one of them to 5: [0, 3, 1] (loads 5, 5, 4); which of the two at 4 gets
    the fourth is a tie (`rng`; without it the one that was emptier). With `limit`, n must not
    exceed `admit(load, n, limit)`: no replica then ends above the limit (the fill raises the
    lowest first, so it reaches the limit only once every replica below it has)."""
    k = load.size
    if n <= 0 or k == 0:
        return np.zeros(k, dtype=np.int64)
    order = _order(load, rng)
    ls = load[order].astype(np.int64)
    cs = np.cumsum(ls)
    lift = np.arange(1, k + 1) * ls - cs  # requests needed to lift the lowest j+1 to level ls[j]
    m = max(int(np.searchsorted(lift, n, side="left")), 1)  # replicas that take part
    level, extra = divmod(n + int(cs[m - 1]), m)
    give = np.zeros(k, dtype=np.int64)
    give[:m] = level - ls[:m]
    lucky = np.arange(extra) if rng is None else rng.choice(m, size=extra, replace=False)
    give[lucky] += 1  # the m replicas all stand at `level`: the remainder is a tie among them
    counts = np.zeros(k, dtype=np.int64)
    counts[order] = np.maximum(give, 0)
    diff = n - int(counts.sum())  # rounding guard: exactly n
    if diff:
        counts[order[0]] += diff
    free = room(load, limit)
    if free is not None and bool((counts > free).any()):
        raise ValueError("water_fill: more requests than the replicas have room for (call admit first)")
    return counts
