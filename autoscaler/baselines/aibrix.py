"""AIBrix APA: a KV-cache usage target with fluctuation tolerances, rate limits and a cooldown.

Sources: vllm-project/aibrix (main, 2025) pkg/controller/podautoscaler/algorithm/apa.go
(`computeTargetReplicas`), pkg/controller/podautoscaler/context/context.go
(`NewBaseScalingContext`: max-scale-up-rate 2, max-scale-down-rate 2, up / down fluctuation
tolerance 0.1, scale-up cooldown 0 s, scale-down cooldown 300 s), pkg/controller/podautoscaler/
podautoscaler_controller.go (`DefaultResyncInterval` 10 s; the cooldown windows of KPA and APA,
`stabilizedRecommendation`, whose behaviour the 2026 test `TestStabilizedRecommendationHoldsCooldownWindows`
in predictive_status_test.go pins: a recent recommendation above the target holds a scale-down),
and AIBrix's autoscaling samples for vLLM models, which scale on `gpu_cache_usage_perc` (the
deepseek-r1-distill-llama-8b PodAutoscalers; `apa.autoscaling.aibrix.ai/window: 30s` in the
APA sample).

As run here (the knob is the KV-cache usage target):

* the metric: the mean KV-cache usage of the ready pods, averaged over the samples of the last
  30 s (the 15 s Prometheus scrapes here; AIBrix reads the pods' /metrics itself);
* every 10 s, with r = metric / target and N the current (spec) replicas: r > 1 + 0.1 ->
  min(ceil(N x r), ceil(2 x N)); r < 1 - 0.1 -> max(ceil(N x r), floor(N / 2)); else N;
* the scale-down cooldown: a recommendation below N waits out 300 s - the highest recommendation
  of the last 300 s wins, as in the HPA (the controller of commit 015a2e5 took the lowest,
  which made the cooldown a no-op; that commit has the guard below too, and the later
  controller has both: its `TestPredictiveCompositionPassesThroughThePendingGuard`); scale-up
  has no cooldown; then [min, max];
* the metric window: 30 s, the APA sample's `apa.autoscaling.aibrix.ai/window: 30s`; the
  controller of 015a2e5 takes it from `spec.observeWindowSeconds` (default 180 s), which an SRE
  following the sample sets to 30.

* the pending-replica guard (pkg/controller/podautoscaler/autoscaler.go, `applyPendingReplicaGuard`,
  stored at commit 015a2e5; applied to APA and KPA recommendations on pod metrics inside
  `ComputeDesiredReplicas`, before the cooldown): with P = N - ready replicas still starting
  (ready = the pods whose metrics the mean holds), a scale-up counts them as missing
  metrics, ceil(N x (usage x ready / N) / target), kept within [N, the recommendation]; a
  scale-down counts them at the target, ceil(N x (usage x ready + target x P) / N / target),
  kept within [the recommendation, N]. Without it a scale-up compounds while pods load: the
  ready pods' usage stays high and multiplies the spec replicas again every 10 s.

Example: 4 pods at KV 0.9, target 0.5: r = 1.8 -> min(ceil(7.2), 8) = 8. The next tick, 8 spec
replicas, 4 of them ready, still at 0.9: r = 1.8 -> min(ceil(14.4), 16) = 15 unguarded; the
guard gives ceil(8 x (0.9 x 4 / 8) / 0.5) = ceil(7.2) = 8 -> kept at N = 8.
"""

from __future__ import annotations

import math

from autoscaler.baselines.view import ClusterView
from autoscaler.baselines.window import TimeWindow


def apa_replicas(current: int, usage: float, target: float, up_tolerance: float = 0.1,
                 down_tolerance: float = 0.1, max_up_rate: float = 2.0, max_down_rate: float = 2.0) -> int:
    """apa.go `computeTargetReplicas`. Worked examples: N 4, r 1.8 -> min(ceil(7.2), ceil(8)) = 8;
    N 8, r 0.2 -> max(ceil(1.6), floor(4)) = 4; N 4, r 1.05 -> 4."""
    r = usage / target
    if r > 1 + up_tolerance:
        return min(math.ceil(current * r - 1e-9), math.ceil(max_up_rate * current))
    if r < 1 - down_tolerance:
        return max(math.ceil(current * r - 1e-9), math.floor(current / max_down_rate))
    return current


def pending_guard(current: int, ready: int, recommendation: int, usage: float, target: float) -> int:
    """autoscaler.go `applyPendingReplicaGuard` for APA (module docstring). Worked examples:
    N 8, ready 4, usage 0.9, target 0.5, recommendation 15 -> ceil(8 x 0.45 / 0.5) = 8 -> 8;
    N 8, ready 6, usage 0.9, recommendation 15 -> ceil(8 x 0.675 / 0.5) = 11 -> 11;
    N 8, ready 4, usage 0.1, target 0.5, recommendation 4 -> ceil(8 x (0.4 + 2.0) / 8 / 0.5) = 5 -> 5;
    N 8, ready 8 (nothing pending) -> the recommendation."""
    ready = min(max(ready, 0), current)
    pending = current - ready
    if pending <= 0 or recommendation == current or current <= 0 or target <= 0:
        return recommendation
    if recommendation > current:
        adjusted = usage * ready / current
        return min(max(math.ceil(current * adjusted / target), current), recommendation)
    adjusted = (usage * ready + target * pending) / current
    return max(min(math.ceil(current * adjusted / target), current), recommendation)


class AibrixApa:
    """AIBrix APA on the mean KV-cache usage per pod."""

    name = "aibrix-apa"
    interval_s = 10.0  # DefaultResyncInterval
    pod_concurrency_limit: int | None = None

    def __init__(self, target: float = 0.5, min_replicas: int = 1, max_replicas: int = 100,
                 tolerance: float = 0.1, window_s: float = 30.0, scale_down_cooldown_s: float = 300.0) -> None:
        self.target = target
        self.tol = tolerance
        self.window_s = window_s
        self.cooldown = scale_down_cooldown_s
        self.min_replicas, self.max_replicas = min_replicas, max_replicas
        self.metric = TimeWindow(window_s)
        self.recommendations = TimeWindow(scale_down_cooldown_s)

    def decide(self, view: ClusterView, now: float) -> int:
        current = view.spec_replicas
        kv = [p.kv for p in view.ready if p.kv is not None]
        if not kv:
            return current  # no pod reports yet: no recommendation
        self.metric.add(now, sum(kv) / len(kv))
        usage = self.metric.mean(now, self.window_s)
        if usage is None:
            return current
        recommendation = apa_replicas(current, usage, self.target, self.tol, self.tol)
        # ready = the pods behind the mean: AIBrix reads each pod's /metrics itself, so a pod counts
        # once it answers; a pod ready here but not yet scraped is still "pending" to the guard
        recommendation = pending_guard(current, len(kv), recommendation, usage, self.target)
        self.recommendations.add(now, float(recommendation))
        if recommendation < current:  # cooldown: the highest recommendation of the window
            recommendation = int(self.recommendations.maximum(now, self.cooldown) or recommendation)
            recommendation = min(recommendation, current)
        return min(max(recommendation, self.min_replicas), self.max_replicas)
