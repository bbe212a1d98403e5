"""Synthetic recordings: a made-up load on a toy fleet, scaled closed-loop by a policy.

Used by the tests (an HPA-scaled Deployment whose replica timeline the `hpa-queue` replay must
reproduce) and by `make bench` (30 days at 15 s). The fleet is a fluid queue, not the
simulator's fleet model: each ready replica runs up to `batch` requests and finishes
`service_rate` requests per second when full; new pods are created at once, scheduled after
`schedule_seconds` and ready after `load_seconds` more. Deterministic for a given seed.
"""

from __future__ import annotations

import math
import random
from collections.abc import Callable, Iterator

from autoscaler.baselines.interface import ObservationPolicy
from autoscaler.policy.types import MetricSample, Observation, PodStage
from autoscaler.replay.format import Header, RecordedPod, Step
from autoscaler.replay.open_loop import observation_of


def diurnal_load(mean: float = 6.0, amplitude: float = 4.0, period: float = 86_400.0, seed: int = 1) -> Callable[[float], float]:
    """Arrivals per second: a daily sine plus bursts, never negative."""
    rng = random.Random(seed)
    bursts = [(rng.uniform(0, period), rng.uniform(300, 1800), rng.uniform(2, 10)) for _ in range(4)]

    def rate(t: float) -> float:
        base = mean + amplitude * math.sin(2 * math.pi * t / period)
        tod = t % period
        extra = sum(h for start, dur, h in bursts if start <= tod < start + dur)
        return max(0.0, base + extra)

    return rate


def generate(
    policy: ObservationPolicy,
    *,
    steps: int,
    step_seconds: float = 15.0,
    start: float = 1_764_547_200.0,
    arrivals: Callable[[float], float] | None = None,
    initial_replicas: int = 2,
    batch: int = 16,
    service_rate: float = 1.0,
    schedule_seconds: float = 5.0,
    load_seconds: float = 60.0,
    namespace: str = "llm",
    deployment: str = "qwen",
) -> tuple[Header, Iterator[Step]]:
    """The header and (lazily) the steps of a recording of `policy` scaling the toy fleet."""
    rate = arrivals or diurnal_load()
    header = Header(
        namespace, deployment, step_seconds, start, start + (steps - 1) * step_seconds,
        {"synthetic": True, "readiness_source": "synthetic", "spec_source": "synthetic",
         "notes": ["synthetic fluid-queue fleet (autoscaler.replay.synthetic)"]},
    )

    def run() -> Iterator[Step]:
        spec = initial_replicas
        counter = 0
        # pod name -> (created_at, scheduled_at, ready_at)
        pods: dict[str, tuple[float, float, float]] = {}
        for _ in range(initial_replicas):
            pods[f"{deployment}-{counter:05d}"] = (start - 900, start - 895, start - 600)
            counter += 1
        backlog = 0.0  # requests in the fleet (waiting + running)
        for k in range(steps):
            t = start + k * step_seconds
            ready_names = sorted(n for n, (_, _, r) in pods.items() if r <= t)
            ready = len(ready_names)
            capacity = ready * service_rate
            backlog = max(0.0, backlog + rate(t) * step_seconds - (capacity * step_seconds if ready else 0.0))
            per_pod = backlog / ready if ready else 0.0
            running = min(per_pod, float(batch))
            waiting = round(max(0.0, per_pod - running), 3)
            running = round(running, 3)
            completed = round(service_rate * min(1.0, per_pod / batch) if per_pod else 0.0, 4)
            recorded: list[RecordedPod] = []
            for name in sorted(pods):
                c, s, r = pods[name]
                is_ready = r <= t
                stage = None if is_ready else (PodStage.LOADING if s <= t else PodStage.UNSCHEDULABLE)
                ts = t - 1.0
                recorded.append(RecordedPod(
                    name=name, ready=is_ready, stage=stage,
                    waiting=MetricSample(waiting, ts) if is_ready else None,
                    running=MetricSample(running, ts) if is_ready else None,
                    kv=MetricSample(round(min(1.0, running / batch), 4), ts) if is_ready else None,
                    kv_metric="vllm:kv_cache_usage_perc" if is_ready else None,
                    completed=MetricSample(completed, ts) if is_ready else None,
                    created=c, scheduled=s if s <= t else None, ready_at=r if is_ready else None,
                ))
            step = Step(t=t, spec=spec, ready=ready, pods=tuple(recorded),
                        demand={"requests_per_second": round(rate(t), 4)})
            yield step
            obs: Observation = observation_of(step)
            desired, _, _ = policy(obs, t)
            if desired > spec:
                for _ in range(desired - spec):
                    pods[f"{deployment}-{counter:05d}"] = (t + 0.5, t + schedule_seconds, t + schedule_seconds + load_seconds)
                    counter += 1
            elif desired < spec:
                # the ReplicaSet deletes not-ready pods first, then the newest
                order = sorted(pods, key=lambda n: (pods[n][2] <= t, pods[n][0]), reverse=False)
                order = [n for n in order if pods[n][2] > t] + sorted(
                    (n for n in order if pods[n][2] <= t), key=lambda n: -pods[n][0])
                for name in order[: spec - desired]:
                    del pods[name]
            spec = desired

    return header, run()
