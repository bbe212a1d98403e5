"""llm-d workload-variant-autoscaler (WVA): the V1 saturation analyzer."""

from __future__ import annotations

from autoscaler.baselines.view import ClusterView


class Wva:
    """llm-d workload-variant-autoscaler, V1 saturation analyzer (llm-d-incubation/
    workload-variant-autoscaler internal/saturation/analyzer.go; defaults kvCacheThreshold 0.8,
    queueLengthThreshold 5, kvSpareTrigger 0.1, queueSpareTrigger 3 from its saturation
    ConfigMap docs; MinNonSaturatedReplicasForScaleDown = 2), one variant, every 60 s:

    * a replica is saturated when its KV usage >= 0.8 or its queue >= 5; the spare KV (0.8 - KV)
      and spare queue (5 - waiting) are averaged over the *non-saturated* replicas (0 when all
      are saturated);
    * while the model is in transition (spec != ready replicas with metrics, or pods pending),
      hold;
    * scale up to ready + 1 when the average spare KV < 0.1 or the average spare queue < 3;
    * else scale down to ready - 1 when it is safe: at least 2 non-saturated replicas and,
      with their load spread over one fewer (x N / (N - 1)), both spares still >= the triggers.

    Example: 4 ready pods at KV 0.75, 0.5, 0.5, 0.9 (the last saturated): spare KV over the
    three others (0.05 + 0.3 + 0.3) / 3 = 0.217 >= 0.1, spare queue 5 >= 3: no scale-up;
    scale-down: KV load 0.583 x 3 / 2 = 0.875 > 0.8 - 0.1: not safe, so hold at 4."""

    name = "wva"
    interval_s = 60.0

    def __init__(self, kv_threshold: float = 0.8, queue_threshold: float = 5.0, kv_spare: float = 0.1,
                 queue_spare: float = 3.0, min_replicas: int = 1, max_replicas: int = 100) -> None:
        self.kv_t, self.q_t, self.kv_s, self.q_s = kv_threshold, queue_threshold, kv_spare, queue_spare
        self.min_replicas, self.max_replicas = min_replicas, max_replicas

    def decide(self, view: ClusterView, now: float) -> int:
        current = view.spec_replicas
        pods = [p for p in view.ready if p.kv is not None and p.waiting is not None]
        if not pods or view.in_flight or len(pods) != current:
            return current  # in transition (or no metrics): hold
        free = [p for p in pods if (p.kv or 0.0) < self.kv_t and (p.waiting or 0.0) < self.q_t]
        n = len(free)
        spare_kv = sum(self.kv_t - (p.kv or 0.0) for p in free) / n if n else 0.0
        spare_q = sum(self.q_t - (p.waiting or 0.0) for p in free) / n if n else 0.0
        ready = len(pods)
        desired = ready
        if spare_kv < self.kv_s or spare_q < self.q_s:
            desired = ready + 1
        elif n >= 2:
            f = n / (n - 1)
            if (self.kv_t - (self.kv_t - spare_kv) * f >= self.kv_s
                    and self.q_t - (self.q_t - spare_q) * f >= self.q_s):
                desired = ready - 1
        return min(max(desired, self.min_replicas), self.max_replicas)
