"""Step 1, metric health: which ready pods have samples we may trust this tick.

A pod is healthy when all three of its samples (waiting, running, KV-cache usage) are present,
finite, non-negative and no older than `stale_after_seconds`. Anything else is unhealthy and is
never read as zero: the demand step extrapolates from the healthy pods, and the decision may
then only go up, never down.
"""

from __future__ import annotations

from dataclasses import dataclass
from math import isfinite

from autoscaler.policy.types import MetricSample, ReadyPod, SampleHealth

_WORST_FIRST = (SampleHealth.NAN, SampleHealth.ABSENT, SampleHealth.STALE)


@dataclass(frozen=True)
class HealthReport:
    healthy: tuple[ReadyPod, ...]
    unhealthy: dict[str, SampleHealth]  # pod name -> the worst health among its samples

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
    """The worst health among the pod's three samples (NAN, then ABSENT, then STALE)."""
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


def assess_health(pods: tuple[ReadyPod, ...], now: float, stale_after_seconds: float) -> HealthReport:
    """Split ready pods into healthy ones and unhealthy ones (with why)."""
    healthy: list[ReadyPod] = []
    unhealthy: dict[str, SampleHealth] = {}
    for pod in pods:
        health = pod_health(pod, now, stale_after_seconds)
        if health is SampleHealth.FRESH:
            healthy.append(pod)
        else:
            unhealthy[pod.name] = health
    return HealthReport(healthy=tuple(healthy), unhealthy=unhealthy)
