"""What a policy sees each tick: the `ClusterView` of the fleet (Prometheus-scraped vLLM gauges
per ready pod, live outstanding requests where a baseline reads a proxy instead of Prometheus,
pods in flight, free GPUs, requests held at the router), and `view_observation`, the
`Observation` the live loop would build of it.

The simulator builds the view (`autoscaler.sim.cluster.Cluster.view`); every policy reads it.
"""

from __future__ import annotations

from dataclasses import dataclass

from autoscaler.policy import (
    MetricSample,
    Observation,
    PodInFlight,
    PodStage,
    PodStartup,
    ReadyPod,
)
from autoscaler.policy.slo_series import sum_slo_series
from autoscaler.policy.types import LatencyHistogram


@dataclass(frozen=True)
class PodMetrics:
    """What a policy can read about one ready pod."""

    name: str
    waiting: float | None  # scraped gauges (None until the first scrape after ready)
    running: float | None
    kv: float | None
    sample_t: float | None
    completed_per_second: float | None  # rate(request_success_total[window]) or None
    outstanding_now: int  # live waiting + running (what a proxy / replica reports directly)
    created: float
    scheduled: float | None
    ready: float
    # vLLM's token counters and latency histograms as rates over the rate window (None until the
    # pod has two scrapes in it; a source that does not give them leaves them None)
    prompt_tokens_per_second: float | None = None  # rate(vllm:prompt_tokens_total[w])
    generation_tokens_per_second: float | None = None  # rate(vllm:generation_tokens_total[w])
    ttft: LatencyHistogram | None = None  # rate(vllm:time_to_first_token_seconds_bucket[w]) by le
    tpot: LatencyHistogram | None = None  # ... vllm:request_time_per_output_token_seconds_bucket
    queue_time: LatencyHistogram | None = None  # ... vllm:request_queue_time_seconds_bucket


@dataclass(frozen=True)
class InFlightPod:
    name: str
    stage: PodStage
    created: float
    scheduled: float | None


@dataclass(frozen=True)
class ClusterView:
    spec_replicas: int
    ready: tuple[PodMetrics, ...]
    in_flight: tuple[InFlightPod, ...]
    free_gpus: int
    router_pending: int


def view_observation(view: ClusterView) -> Observation:
    """What the live loop would observe of this view (autoscaler/controller/observe.py): per ready pod its
    scraped gauges with their sample time, the token rates and latency histograms of the SLO
    signals (the histograms carry their own sample time), the pods in flight with stage and
    timestamps, the free GPUs, the pods' SLO series summed (`sum_slo_series`). queue-lead's `decide()` and the HPA model
    (`autoscaler.baselines.hpa`) read it."""
    ready = []
    for p in view.ready:
        ts = p.sample_t if p.sample_t is not None else 0.0
        ready.append(ReadyPod(
            name=p.name,
            waiting=MetricSample(p.waiting, ts) if p.waiting is not None else None,
            running=MetricSample(p.running, ts) if p.running is not None else None,
            kv_cache_usage=MetricSample(p.kv, ts) if p.kv is not None else None,
            startup=PodStartup(p.created, p.scheduled, p.ready),
            completed_per_second=MetricSample(p.completed_per_second, ts) if p.completed_per_second is not None else None,
            prompt_tokens_per_second=(MetricSample(p.prompt_tokens_per_second, ts)
                                      if p.prompt_tokens_per_second is not None else None),
            generation_tokens_per_second=(MetricSample(p.generation_tokens_per_second, ts)
                                          if p.generation_tokens_per_second is not None else None),
            ttft=p.ttft, tpot=p.tpot, queue_time=p.queue_time,
        ))
    flight = tuple(PodInFlight(f.name, f.stage, PodStartup(f.created, f.scheduled)) for f in view.in_flight)
    pods = tuple(ready)
    return Observation(spec_replicas=view.spec_replicas, ready_pods=pods, pods_in_flight=flight,
                       free_gpus=view.free_gpus, slo_series=sum_slo_series(pods))
