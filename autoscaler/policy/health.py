"""Step 1, metric health: which ready pods have samples we may trust this tick.

A pod is healthy when all three of its samples (waiting, running, KV-cache usage) are present,
finite, non-negative and no older than `stale_after_seconds`. Anything else is unhealthy and is
never read as zero: the demand step extrapolates from the healthy pods, and the decision may
then only go up, never down.

One exception to the extrapolation, never to the no-scale-down rule: a pod that became ready
less than `stale_after_seconds` ago and has no series at all yet is *warming*. It has not been
scraped because it has only just started serving, so it holds (next to) nothing; standing the
busy old pods in for it would count the fleet's load twice and overshoot (simulator, ServeGen:
16 pods ready for one scrape read as 9,587 running requests where 2,813 were). Warming pods
count as idle for scale-up, HPA's rule for pods without metrics on a scale-up ("treat missing
pods as using 0% of the resource request", kubernetes pkg/controller/podautoscaler/
replica_calculator.go), and, being unhealthy, still forbid any scale-down.
"""

from __future__ import annotations

from dataclasses import dataclass
from math import inf, isfinite

from autoscaler.policy.types import MetricSample, ReadyPod, SampleHealth, fast_init

_WORST_FIRST = (SampleHealth.NAN, SampleHealth.ABSENT, SampleHealth.STALE)


@fast_init
@dataclass(frozen=True)
class HealthReport:
    healthy: tuple[ReadyPod, ...]
    unhealthy: dict[str, SampleHealth]  # pod name -> the worst health among its samples
    warming: tuple[str, ...] = ()  # of the unhealthy: just ready, no series yet, count as idle

    @property
    def all_healthy(self) -> bool:
        return not self.unhealthy


def sample_health(sample: MetricSample | None, now: float, stale_after_seconds: float) -> SampleHealth:
    """Classify one sample.

    Worked example: stale_after_seconds = 60, now = 1000. A sample stamped 940 is 60 s old:
    FRESH (the edge is still fresh); stamped 939 it is 61 s old: STALE. A value of NaN is NAN
    whatever its age, and a missing series is ABSENT.
    """
    if sample is None:
        return SampleHealth.ABSENT
    return sample.health(now, stale_after_seconds)


def pod_health(pod: ReadyPod, now: float, stale_after_seconds: float) -> SampleHealth:
    """The worst health among the pod's three samples (NAN, then ABSENT, then STALE).
    (`assess_health` tells the usual, fresh pod in one go before calling this.)"""
    worst = 3  # index into _WORST_FIRST; 3 = fresh
    for s in (pod.waiting, pod.running, pod.kv_cache_usage):
        if s is None:
            worst = min(worst, 1)
            continue
        value = s.value
        if not isfinite(value) or value < 0:
            return SampleHealth.NAN
        if now - s.timestamp > stale_after_seconds:
            worst = min(worst, 2)
    return _WORST_FIRST[worst] if worst < 3 else SampleHealth.FRESH


def is_warming(pod: ReadyPod, now: float, stale_after_seconds: float) -> bool:
    """A pod ready for at most `stale_after_seconds` with none of its three series yet.

    Worked example: stale_after_seconds = 60, now = 1000. Ready at 950 with no samples: warming
    (50 s, not scraped yet). Ready at 930: not warming (70 s: a scrape should have come, so a
    missing series is a fault). Ready at 950 with a running sample but no waiting one: not
    warming (it is scraped; the missing series is a fault). No ready time known: not warming.
    """
    if pod.waiting is not None or pod.running is not None or pod.kv_cache_usage is not None:
        return False
    ready_at = pod.startup.ready_at if pod.startup is not None else None
    return ready_at is not None and 0.0 <= now - ready_at <= stale_after_seconds


def assess_health(pods: tuple[ReadyPod, ...], now: float, stale_after_seconds: float) -> HealthReport:
    """Split ready pods into healthy ones and unhealthy ones (with why), and name the warming ones."""
    healthy: list[ReadyPod] = []
    unhealthy: dict[str, SampleHealth] = {}
    warming: list[str] = []
    for pod in pods:
        w, r, k = pod.waiting, pod.running, pod.kv_cache_usage
        if (  # the usual pod, in one go: all three present, finite and >= 0 (0 <= x < inf), fresh
            w is not None and r is not None and k is not None
            and 0.0 <= w.value < inf and now - w.timestamp <= stale_after_seconds
            and 0.0 <= r.value < inf and now - r.timestamp <= stale_after_seconds
            and 0.0 <= k.value < inf and now - k.timestamp <= stale_after_seconds
        ):
            healthy.append(pod)
            continue
        health = pod_health(pod, now, stale_after_seconds)
        if health is SampleHealth.FRESH:
            healthy.append(pod)
        else:
            unhealthy[pod.name] = health
            if health is SampleHealth.ABSENT and is_warming(pod, now, stale_after_seconds):
                warming.append(pod.name)
    return HealthReport(tuple(healthy), unhealthy, tuple(warming))
