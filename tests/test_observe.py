"""The pure join of the cluster view and Prometheus' answer into an Observation."""

from __future__ import annotations

import math
import time

from autoscaler.adapters.kubernetes.objects import ClusterSnapshot, DeploymentInfo, snapshot_from_objects
from autoscaler.controller.observe import build_observation
from autoscaler.policy import MetricSample, PodStage
from autoscaler.adapters.prometheus import PodMetrics
from tests.kube_api_server import deployment, node, pod

NOW = time.time()


def metrics(waiting: float) -> PodMetrics:
    s = MetricSample(waiting, NOW)
    return PodMetrics(waiting=s, running=s, kv_cache_usage=MetricSample(0.5, NOW), kv_metric_name="vllm:kv_cache_usage_perc",
                      completed_per_second=MetricSample(1.0, NOW))


def snapshot() -> tuple[ClusterSnapshot, DeploymentInfo]:
    snap = snapshot_from_objects(
        deployments=[deployment("qwen", "llm", replicas=5, labels={"app": "qwen"})],
        pods=[
            pod("qwen-a", "llm", labels={"app": "qwen"}, state="ready"),
            pod("qwen-b", "llm", labels={"app": "qwen"}, state="ready"),
            pod("qwen-c", "llm", labels={"app": "qwen"}, state="loading"),
            pod("qwen-d", "llm", labels={"app": "qwen"}, state="unschedulable", node_name=None),
            pod("qwen-e", "llm", labels={"app": "qwen"}, state="ready", terminating=True),
            pod("other", "llm", labels={"app": "other"}, state="ready"),
        ],
        nodes=[node("gpu-node-1", gpus=8)],
        hpas=[],
    )
    dep = snap.deployment("llm", "qwen")
    assert dep is not None
    return snap, dep


def test_ready_pods_get_their_metrics_and_missing_ones_stay_absent() -> None:
    snap, dep = snapshot()
    obs = build_observation(snap, dep, {("llm", "qwen-a"): metrics(3.0)})
    assert obs.spec_replicas == 5
    assert [p.name for p in obs.ready_pods] == ["qwen-a", "qwen-b"]  # terminating and other app excluded
    a, b = obs.ready_pods
    assert a.waiting == MetricSample(3.0, NOW) and a.completed_per_second == MetricSample(1.0, NOW)
    assert (b.waiting, b.running, b.kv_cache_usage) == (None, None, None)  # absent, never zero
    assert a.startup is not None and a.startup.ready_at is not None
    assert [(p.name, p.stage) for p in obs.pods_in_flight] == [
        ("qwen-c", PodStage.LOADING),
        ("qwen-d", PodStage.UNSCHEDULABLE),
    ]
    # 8 GPUs; qwen-a, qwen-b, qwen-c, the terminating qwen-e and "other" hold one each on gpu-node-1
    assert obs.free_gpus == 3


def test_prometheus_unreadable_makes_every_ready_pod_absent() -> None:
    snap, dep = snapshot()
    obs = build_observation(snap, dep, None)
    assert all(p.waiting is None and p.kv_cache_usage is None for p in obs.ready_pods)
    assert not any(isinstance(p.waiting, MetricSample) and math.isnan(p.waiting.value) for p in obs.ready_pods)


def test_ready_pods_get_the_slo_signals() -> None:
    from autoscaler.policy.types import LatencyHistogram

    snap, dep = snapshot()
    hist = LatencyHistogram((0.5, math.inf), (2.0, 4.0), NOW)
    m = PodMetrics(waiting=None, running=None, kv_cache_usage=None, kv_metric_name=None,
                   prompt_tokens_per_second=MetricSample(888.0, NOW), generation_tokens_per_second=MetricSample(5730.0, NOW),
                   ttft=hist, tpot=hist, queue_time=None)
    a, b = build_observation(snap, dep, {("llm", "qwen-a"): m}).ready_pods
    assert a.prompt_tokens_per_second == MetricSample(888.0, NOW)
    assert a.generation_tokens_per_second == MetricSample(5730.0, NOW)
    assert (a.ttft, a.tpot, a.queue_time) == (hist, hist, None)
    assert (b.prompt_tokens_per_second, b.generation_tokens_per_second, b.ttft, b.tpot, b.queue_time) == (None,) * 5


def test_the_pods_slo_series_are_read_once_where_the_observation_is_built() -> None:
    """Both ready pods with all four SLO series: one summary, the very reading `read_slo` makes
    of them; one pod without: none (decide() then reads the pods one by one)."""
    from autoscaler.policy.slo_capacity import read_slo
    from autoscaler.policy.types import LatencyHistogram

    snap, dep = snapshot()
    hist = LatencyHistogram((0.5, math.inf), (2.0, 4.0), NOW)
    s = MetricSample(1.0, NOW)
    m = PodMetrics(waiting=s, running=s, kv_cache_usage=s, kv_metric_name="vllm:kv_cache_usage_perc",
                   prompt_tokens_per_second=MetricSample(888.0, NOW), generation_tokens_per_second=MetricSample(57.0, NOW),
                   ttft=hist, tpot=hist, queue_time=None)
    obs = build_observation(snap, dep, {("llm", "qwen-a"): m, ("llm", "qwen-b"): m})
    assert obs.slo_series is not None and obs.slo_series.pods is obs.ready_pods
    assert obs.slo_series.reading == read_slo(obs.ready_pods, 2, NOW, 60.0)
    assert obs.slo_series.reading.prompt_tokens_per_second == 1776.0
    assert build_observation(snap, dep, {("llm", "qwen-a"): m}).slo_series is None
