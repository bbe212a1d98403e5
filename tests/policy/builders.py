"""Small builders for policy observations (test-only)."""

from __future__ import annotations

from autoscaler.policy import (
    MetricSample,
    Observation,
    PodInFlight,
    PodStage,
    PodStartup,
    ReadyPod,
)
from autoscaler.policy.types import LatencyHistogram


def pod(
    name: str,
    waiting: float | None,
    running: float | None,
    kv: float | None,
    at: float,
    startup: PodStartup | None = None,
    done: float | None = None,
) -> ReadyPod:
    """A ready pod; `done` is its finished requests per second (None: no such series)."""

    def s(v: float | None) -> MetricSample | None:
        return None if v is None else MetricSample(v, at)

    return ReadyPod(name, s(waiting), s(running), s(kv), startup, completed_per_second=s(done))


def pods(
    n: int, waiting: float, running: float, kv: float, at: float, done: float | None = None
) -> tuple[ReadyPod, ...]:
    return tuple(pod(f"p{i}", waiting, running, kv, at, done=done) for i in range(n))


def flying(name: str, stage: PodStage, created: float, scheduled: float | None = None) -> PodInFlight:
    return PodInFlight(name, stage, PodStartup(created_at=created, scheduled_at=scheduled))


def obs(spec: int, ready: tuple[ReadyPod, ...], **kw: object) -> Observation:
    return Observation(spec_replicas=spec, ready_pods=ready, **kw)  # type: ignore[arg-type]


def hist(bounds: tuple[float, ...], rates: tuple[float, ...], at: float) -> LatencyHistogram:
    return LatencyHistogram(bounds, rates, at)


def slo_pod(
    name: str,
    at: float,
    prompt: float | None,
    generation: float | None,
    ttft: LatencyHistogram | None = None,
    tpot: LatencyHistogram | None = None,
    waiting: float = 0.0,
    running: float = 4.0,
    kv: float = 0.5,
    done: float | None = None,
) -> ReadyPod:
    """A healthy ready pod with the SLO series (token rates per second, TTFT/TPOT histograms)."""

    def s(v: float | None) -> MetricSample | None:
        return None if v is None else MetricSample(v, at)

    return ReadyPod(
        name, s(waiting), s(running), s(kv), None, completed_per_second=s(done),
        prompt_tokens_per_second=s(prompt), generation_tokens_per_second=s(generation), ttft=ttft, tpot=tpot,
    )
