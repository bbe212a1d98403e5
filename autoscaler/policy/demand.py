"""Step 2, demand: how many replicas the load needs right now, from the queue and the KV cache.

Two signals, each turned into a (fractional) replica count; the larger wins.

**Queue.** Only replicas with a queue (at least `saturated_waiting_per_replica` waiting) run a
full batch, so only they tell what one replica can do. With none, there is no queue pressure
and the queue asks for nothing (the KV cache decides). With some, two models:

* *rate* (when the saturated pods report `completed_per_second`): a saturated replica finishes
  `mu` requests/s; requests arrive at `lambda` = throughput + d(waiting + running)/dt, both
  averaged over the same window (`arrival_rate`). Needed:
  lambda / mu replicas to keep up, plus, for each replica whose queue is above target, up to
  one more replica while it drains: its excess / (mu * `queue_drain_seconds`), at most 1.
  vLLM queues per pod: a backlog stays on the pod that holds it, and the most that new
  replicas can do is take all new arrivals off it, so more than one replica per backlogged
  pod never helps; and drain help never exceeds keep-up help. This sizes for the arrival rate, not the backlog, so a queue that piles up
  while new pods load does not multiply the replicas.
* *batch* (no throughput series): a saturated replica runs `c` requests at once, and we allow
  `target_waiting_per_replica` (t) more behind it: (waiting + running) / (c + t), but at most
  one more replica per pod queued above target (the per-pod queue argument above): without a
  throughput the backlog cannot be told from the arrival rate, so this model at most doubles
  per lead time instead of chasing the backlog every tick.

**KV cache.** Sum of per-pod KV usage (0..1) over the target usage: HPA's AverageValue rule.

**Batch** (optional, `target_running_per_replica`). A replica's time per output token grows
with its running batch; when the KV cache holds many short requests, the batch can break a
TPOT SLO long before KV usage looks high. Sum of running over the target batch per replica.

Pods whose samples are unhealthy are not read as zero: the healthy pods' averages stand in for
them (the caller then forbids any scale-down).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from autoscaler.policy.types import MetricSample, ReadyPod, fast_init

# A saturated replica finishing fewer requests than this is stuck, not slow: the rate model
# would divide by (almost) zero, so the batch model is used instead.
MIN_THROUGHPUT_PER_SECOND = 1e-3

EPSILON = 1e-9  # a need this close above a whole number of replicas is that number
_MAX_REPLICAS = 1_000_000  # beyond any bound; keeps absurd readings finite


def whole_replicas(x: float) -> int:
    """A fractional need in whole replicas: rounded up, except for float noise (a need at most
    1e-9 above a whole number is that number); absurd or NaN needs are capped at 1,000,000.

    Worked example: 4.18 -> 5; 4.0000000001 -> 4; 1e12 -> 1,000,000; NaN -> 1,000,000.
    """
    if not x < _MAX_REPLICAS:  # also NaN
        return _MAX_REPLICAS
    return math.ceil(x - EPSILON)


@fast_init
@dataclass(frozen=True)
class Demand:
    waiting_total: float  # over all ready pods (extrapolated where unhealthy)
    running_total: float
    kv_usage_total: float
    saturated_pods: int
    completed_per_second: float | None  # fleet throughput, None when not every pod reports it
    arrivals_per_second: float | None
    replica_throughput_per_second: float | None
    queue_model: str  # "rate", "batch" or "none"
    queue_replicas: float
    kv_replicas: float
    batch_replicas: float = 0.0
    # the mean fleet throughput over the arrival estimate's window (None: no estimate); the
    # arrivals' own denominator, so that arrivals / completions compares like with like
    window_completed_per_second: float | None = None

    @property
    def load(self) -> float:
        """Requests in the system: waiting + running."""
        return self.waiting_total + self.running_total

    @property
    def replicas(self) -> float:
        """The most of the three (`max` of two at a time: the same value, compiled without a
        call)."""
        return max(max(self.queue_replicas, self.kv_replicas), self.batch_replicas)

    @property
    def driver(self) -> str:
        """Which signal asks for the most: queue, then kv_cache, then batch on ties."""
        if self.queue_replicas >= max(self.kv_replicas, self.batch_replicas):
            return "queue"
        return "kv_cache" if self.kv_replicas >= self.batch_replicas else "batch"


def rate_queue_replicas(
    arrivals_per_second: float,
    replica_throughput_per_second: float,
    waiting_per_pod: list[float],
    target_waiting_per_replica: float,
    queue_drain_seconds: float,
) -> float:
    """Replicas to keep up with arrivals, plus drain help for the pods queued above target.

    Worked example: arrivals 12 req/s, a saturated replica finishes 1.6 req/s, target 3, drain
    120 s, pods waiting [99, 1000]: 12 / 1.6 = 7.5 to keep up; pod one's excess 96 drains in
    96 / (1.6 * 120) = 0.5 of a replica, pod two's 997 counts as a full one (at most 1):
    7.5 + 0.5 + 1 = 9.0 replicas.
    """
    mu = replica_throughput_per_second
    keep_up = max(0.0, arrivals_per_second) / mu
    drain = sum(
        [min(1.0, max(0.0, w - target_waiting_per_replica) / (mu * queue_drain_seconds)) for w in waiting_per_pod]
    )
    return keep_up + drain


def batch_queue_replicas(waiting: float, running: float, batch_per_replica: float, target_waiting_per_replica: float) -> float:
    """Replicas so each holds a full batch plus the target queue.

    Worked example: 30 waiting, 16 running, a saturated replica runs 8, target 3:
    (30 + 16) / (8 + 3) = 46 / 11 = 4.18 replicas.
    """
    return (waiting + running) / (batch_per_replica + target_waiting_per_replica)


def kv_replicas(kv_usage_total: float, target_kv_cache_usage_ratio: float) -> float:
    """Replicas needed to bring mean KV-cache usage to its target.

    Worked example: 4 pods at 0.9 KV usage each, target 0.8: 3.6 / 0.8 = 4.5 replicas.
    """
    return kv_usage_total / target_kv_cache_usage_ratio


def fleet_throughput(
    healthy: tuple[ReadyPod, ...], ready: int, now: float, stale_after_seconds: float
) -> float | None:
    """Requests/s the `ready` pods finish, or None when no healthy pod reports it.

    A healthy pod without a throughput sample is one that just became ready (rate() needs two
    scrapes): it has finished next to nothing yet and counts 0. Turning the rate model off for
    it would hand a whole backlog to the batch model, which over-reacts (seen in the simulator:
    24 -> 48 replicas the tick a pod became ready).

    Worked example: 3 ready pods, 2 healthy ones finishing 1.5 and 1.7 req/s: (1.5 + 1.7) * 3 / 2
    = 4.8 req/s. If the second had no series yet: 1.5 * 3 / 2 = 2.25. If neither: None.
    """
    if not healthy:
        return None
    rates = [r for p in healthy if (r := _rate(p.completed_per_second, now, stale_after_seconds)) is not None]
    if not rates:
        return None
    return sum(rates) * ready / len(healthy)


def throughput_partial(healthy: tuple[ReadyPod, ...], now: float, stale_after_seconds: float) -> bool:
    """True when some healthy pod has no usable throughput sample: `fleet_throughput` then
    counts it as 0, which may understate arrivals, so such a reading must never scale down.

    Worked example: pods reporting 1.5 and (none): True; 1.5 and 1.7: False.
    """
    return any(_rate(p.completed_per_second, now, stale_after_seconds) is None for p in healthy)


def throughput_lost(healthy: tuple[ReadyPod, ...], now: float, stale_after_seconds: float) -> bool:
    """True when a healthy pod that should have a throughput sample has none: one ready for
    longer than `stale_after_seconds` (or since when unknown). `fleet_throughput` counts it as
    0, and such a reading must not enter the throughput history: there it would understate the
    arrivals for a whole forecast window after the series came back, and scale down on
    healthy data (found by a review). A pod ready for less has had no time to finish a
    request or be scraped twice: its 0 is what it served.

    Worked example: stale after 60 s, now 1000; a pod without a rate ready at 970: False (new);
    ready at 900, or with no ready time: True.
    """
    for p in healthy:
        if _rate(p.completed_per_second, now, stale_after_seconds) is None:
            ready_at = p.startup.ready_at if p.startup is not None else None
            if ready_at is None or not now - ready_at <= stale_after_seconds:
                return True
    return False


def mean_throughput(throughput_history: tuple[tuple[float, float], ...]) -> float | None:
    """The mean of the throughput samples of the window (None: none): the term of
    `arrival_rate` the arrivals are compared with.

    Worked example: samples 3.0, 3.2, 3.4: 3.2.
    """
    if not throughput_history:
        return None
    total = 0.0  # a plain loop adding from 0.0 as `sum` does: the same float, compiled without a list
    for _, v in throughput_history:
        total += v
    return total / len(throughput_history)


def arrival_rate(
    load_history: tuple[tuple[float, float], ...],
    throughput_history: tuple[tuple[float, float], ...],
    mean: float | None = None,
) -> float | None:
    """Arrivals/s over the window: mean throughput plus the net growth of the load.

    Both terms span the same window, so a throughput that jumps when new pods start serving is
    not set against a load trend that still remembers the backlog growing.

    Worked example: load (0, 100), (15, 130), (30, 160): net growth 60 / 30 = 2 req/s;
    throughput samples 3.0, 3.2, 3.4: mean 3.2; arrivals 5.2 req/s. `mean`: that mean
    (`mean_throughput`), when the caller has it already.
    """
    if mean is None:
        mean = mean_throughput(throughput_history)
    if mean is None:
        return None
    growth = 0.0
    if len(load_history) >= 2 and load_history[-1][0] > load_history[0][0]:
        (t0, n0), (t1, n1) = load_history[0], load_history[-1]
        growth = (n1 - n0) / (t1 - t0)
    return max(0.0, mean + growth)


def batch_replicas(
    running_total: float, target_running_per_replica: float | None, ready: int = 0, max_growth_ratio: float = math.inf
) -> float:
    """Replicas needed to keep the running batch per replica at its target (0 when off), at
    most `max_growth_ratio` x the `ready` replicas per reading.

    Why the bound: a replica's time per token grows with its batch, so a congested fleet holds
    its requests longer and runs more of them at once than a larger fleet would for the same
    traffic (Little's law). running / target therefore overstates the need exactly when the
    batch is above target (simulator, ServeGen: 9,644 running on 33 replicas read as 61 at
    target 160; once 61 served, the same traffic ran 1,100, and 39 would have done). Bounded
    like the queue model, the batch signal grows the fleet by at most the ratio per reading and
    asks again once the new replicas serve.

    Worked example: 1,086 running over the fleet, target 96 per replica: 11.3 replicas. On 6
    ready replicas with growth ratio 1.5: at most 9.
    """
    if target_running_per_replica is None:
        return 0.0
    return min(running_total / target_running_per_replica, ready * max_growth_ratio)


def compute_demand(
    healthy: tuple[ReadyPod, ...],
    ready: int,
    arrivals_per_second: float | None,
    now: float,
    stale_after_seconds: float,
    *,
    target_waiting_per_replica: float,
    target_kv_cache_usage_ratio: float,
    saturated_waiting_per_replica: float,
    queue_drain_seconds: float,
    target_running_per_replica: float | None = None,
    completed_per_second: float | None = None,
    max_batch_growth_ratio: float = math.inf,
    window_completed_per_second: float | None = None,
) -> Demand:
    """Demand over `ready` pods, from the samples of the `healthy` ones (at least one). `ready`
    is the count the healthy pods stand in for: decide() leaves warming pods (just ready, not
    scraped yet, see health.py) out of it, so they count as idle.
    `completed_per_second` is `fleet_throughput()` of the same pods (None: the rate model is off).

    Worked example (batch model): 3 ready pods, 2 healthy with (waiting, running, kv) =
    (4, 8, 0.9) and (2, 8, 0.7); the third is stale. Scale = 3 / 2 = 1.5: waiting 9, running 24,
    KV sum 2.4. Both healthy pods queue, batch c = 8: (9 + 24) / (8 + 3) = 3.0; KV 2.4 / 0.8 = 3.0.
    """
    if not healthy:
        raise ValueError("compute_demand needs at least one healthy pod")
    scale = ready / len(healthy)
    waits, runs, kv = _gauges(healthy)
    waiting = sum(waits) * scale
    running = sum(runs) * scale
    kv *= scale
    saturated = [i for i, w in enumerate(waits) if w >= saturated_waiting_per_replica]
    arrivals = arrivals_per_second if completed_per_second is not None else None
    mu = _saturated_throughput(healthy, saturated, arrivals, now, stale_after_seconds)
    model, queue = "none", 0.0
    if saturated and mu is not None and arrivals is not None:
        model = "rate"
        queue = _rate_model(arrivals, mu, waits, scale, target_waiting_per_replica, queue_drain_seconds)
    elif saturated:
        model = "batch"
        batch = sum([runs[i] for i in saturated]) / len(saturated)
        above_target = len([w for w in waits if w > target_waiting_per_replica]) * scale
        queue = min(batch_queue_replicas(waiting, running, batch, target_waiting_per_replica), ready + above_target)
    return Demand(  # positional, in field order: from compiled code half the cost of keywords (~0.4 us)
        waiting,  # waiting_total
        running,  # running_total
        kv,  # kv_usage_total
        round(len(saturated) * scale),  # saturated_pods
        completed_per_second,
        arrivals,  # arrivals_per_second
        mu,  # replica_throughput_per_second
        model,  # queue_model
        queue,  # queue_replicas
        kv_replicas(kv, target_kv_cache_usage_ratio),
        batch_replicas(running, target_running_per_replica, ready, max_batch_growth_ratio),
        window_completed_per_second if arrivals is not None else None,
    )


def _gauges(healthy: tuple[ReadyPod, ...]) -> tuple[list[float], list[float], float]:
    """(waiting per pod, running per pod, KV-cache usage summed) of healthy pods, in one pass
    (the sum as `sum` adds it: the same float).

    Worked example: pods (4, 8, 0.9) and (2, 8, 0.7): ([4, 2], [8, 8], 1.6).
    """
    waits: list[float] = []
    runs: list[float] = []
    kv = 0.0
    for p in healthy:
        w, r, k = p.waiting, p.running, p.kv_cache_usage
        if w is None or r is None or k is None:  # guards the type, not the data
            raise ValueError("healthy pod without a sample")
        waits.append(w.value)
        runs.append(r.value)
        kv += k.value
    return waits, runs, kv


def _saturated_throughput(
    healthy: tuple[ReadyPod, ...], saturated: list[int], arrivals: float | None, now: float, stale_after_seconds: float
) -> float | None:
    """A saturated replica's mean throughput (`mu`) when the rate model applies: arrivals known
    and every saturated pod finishing requests; else None (the batch model, or no queue)."""
    if not saturated or arrivals is None:
        return None
    rates = [r for i in saturated if (r := _rate(healthy[i].completed_per_second, now, stale_after_seconds)) is not None]
    if not rates or not all(r >= MIN_THROUGHPUT_PER_SECOND for r in rates):
        return None
    return sum(rates) / len(rates)


def _rate_model(
    arrivals: float, mu: float, waits: list[float], scale: float, target_waiting: float, drain_seconds: float
) -> float:
    """The rate model's queue replicas: keep up, plus drain help for the healthy pods scaled to
    all ready ones (the unhealthy ones are assumed to need it like the healthy average), never
    more than keeping up takes (so the queue demand at most doubles)."""
    keep_up = max(0.0, arrivals) / mu  # rate_queue_replicas without drain help, to the last bit
    with_drain = rate_queue_replicas(arrivals, mu, waits, target_waiting, drain_seconds)
    return keep_up + min(keep_up, (with_drain - keep_up) * scale)


def _rate(sample: MetricSample | None, now: float, stale_after_seconds: float) -> float | None:
    """An optional throughput sample, or None when missing, stale or not finite."""
    if sample is None:
        return None
    value = sample.value
    if not 0.0 <= value < math.inf or now - sample.timestamp > stale_after_seconds:  # NaN, inf, < 0
        return None
    return value
