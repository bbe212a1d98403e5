"""Join what Kubernetes and Prometheus said into the decision core's `Observation`. Pure.

A ready pod with no series in Prometheus gets `None` samples (absent): the core then holds;
it is never read as zero. Pods on their way are those with a stage (unschedulable, scheduled,
loading); terminating and finished pods are neither capacity nor demand.
"""

from __future__ import annotations

from collections.abc import Mapping

from autoscaler.adapters.kubernetes.objects import ClusterSnapshot, DeploymentInfo
from autoscaler.adapters.prometheus import PodMetrics
from autoscaler.policy.slo_series import sum_slo_series
from autoscaler.policy.types import Observation, PodInFlight, PodStartup, ReadyPod


def _ready_pod(name: str, startup: PodStartup | None, m: PodMetrics | None) -> ReadyPod:
    """A ready pod with its signals; every one None (absent) without an answer for the pod."""
    if m is None:
        return ReadyPod(name=name, waiting=None, running=None, kv_cache_usage=None, startup=startup)
    return ReadyPod(
        name=name,
        waiting=m.waiting,
        running=m.running,
        kv_cache_usage=m.kv_cache_usage,
        startup=startup,
        completed_per_second=m.completed_per_second,
        prompt_tokens_per_second=m.prompt_tokens_per_second,
        generation_tokens_per_second=m.generation_tokens_per_second,
        ttft=m.ttft,
        tpot=m.tpot,
        queue_time=m.queue_time,
    )


def build_observation(
    snapshot: ClusterSnapshot,
    deployment: DeploymentInfo,
    metrics: Mapping[tuple[str, str], PodMetrics] | None,
) -> Observation:
    """The observation of one target. `metrics` None means Prometheus could not be read: every
    ready pod is then absent, which holds. The ready pods' SLO series are summed here, once
    (`sum_slo_series`), for `decide()` to read one histogram a family."""
    ready: list[ReadyPod] = []
    in_flight: list[PodInFlight] = []
    for pod in snapshot.pods_of(deployment):
        if pod.terminating or pod.finished:
            continue
        if pod.ready:
            m = metrics.get((pod.namespace, pod.name)) if metrics is not None else None
            ready.append(_ready_pod(pod.name, pod.startup(), m))
            continue
        stage = pod.stage()
        if stage is not None:
            in_flight.append(PodInFlight(name=pod.name, stage=stage, startup=pod.startup()))
    pods = tuple(sorted(ready, key=lambda p: p.name))
    return Observation(
        spec_replicas=deployment.spec_replicas,
        ready_pods=pods,
        pods_in_flight=tuple(sorted(in_flight, key=lambda p: p.name)),
        free_gpus=snapshot.free_gpus_for(deployment) if snapshot.nodes else None,
        rollout_in_progress=deployment.rollout_in_progress,
        slo_series=sum_slo_series(pods),
    )
