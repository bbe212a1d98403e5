"""llm-d workload-variant-autoscaler (WVA): the saturation analyzer V2 (token-based), one variant.

Sources: llm-d/llm-d-workload-variant-autoscaler (main, 2025)
internal/engines/analyzers/saturation_v2/analyzer.go (`Analyze`, `computeReplicaCapacity`,
`computeK2`, `aggregateByVariant`; RollingAverageWindowSize 10), internal/engines/pipeline/
cost_aware_optimizer.go (`costAwareScaleUp` / `costAwareScaleDown`), internal/config
(`DefaultKvCacheThreshold` 0.80, `DefaultQueueLengthThreshold` 5, `DefaultScaleUpThreshold` 0.85,
`DefaultScaleDownBoundary` 0.70), the `GLOBAL_OPT_INTERVAL` default 60 s, and the chart's HPA
(charts/workload-variant-autoscaler/templates/hpa.yaml: an External metric, the desired replicas
WVA exports, AverageValue 1, behavior Pods 10 per 15 s both ways, no stabilization window).

As run here (the knob is kvCacheThreshold), in units of one replica's KV cache:

* per ready pod: demand = KV in use + waiting x the KV a request brings (WVA: the mean prompt
  tokens from vLLM's prompt-token histogram; here the KV one running request holds, kv / running,
  which the view has); k1 = kvCacheThreshold (memory-bound capacity); k2 (compute-bound) = the KV
  in use when the pod's queue is >= 5 (observed, kept as a rolling average of 10), else that
  average, else k1; the pod's capacity = min(k1, k2);
* per replica capacity = the median over ready pods; supply = ready x it, anticipated supply =
  (ready + pending) x it; required = demand / 0.85 - anticipated; spare = supply - demand / 0.70;
* required > 0: + ceil(required / per replica); else spare > 0: - floor(spare / per replica),
  keeping one; every 60 s (WVA's engine);
* the HPA reads that number every 15 s (External AverageValue 1: within 10 % of the current pods it
  holds) and moves at most 10 pods per 15 s.

Not modelled: k2 derived from the deployment's vLLM arguments (for this profile, 1024 seqs and
8192 batched tokens, it comes out near the whole KV cache, so k1 binds at every grid point), the
scheduler queue of llm-d's flow control, several variants and their costs.

Example: 4 pods at KV 0.7, 1 waiting each, 10 running each: demand 4 x (0.7 + 0.07) = 3.08;
k1 0.8; supply 3.2; required 3.08 / 0.85 - 3.2 = 0.42 -> + ceil(0.42 / 0.8) = 1 -> 5.
"""

from __future__ import annotations

import math
import statistics
from collections import deque

from autoscaler.baselines.hpa import (
    HpaDecision,
    HpaParams,
    HpaState,
    ScalingPolicy,
    external_average_value_replicas,
    hpa_sync,
)
from autoscaler.baselines.view import ClusterView, PodMetrics

K2_HISTORY = 10  # RollingAverageWindowSize


def pod_demand(p: PodMetrics) -> float:
    """KV in use plus the KV the waiting requests bring (kv / running each), in KV-cache units."""
    kv, waiting, running = p.kv or 0.0, p.waiting or 0.0, p.running or 0.0
    return kv + (waiting * kv / running if running > 0 else 0.0)


class Wva:
    """WVA saturation V2 + cost-aware optimizer for one variant, actuated through its HPA."""

    name = "wva"
    interval_s = 15.0  # the HPA's sync; the analysis runs every `engine_interval_s`
    pod_concurrency_limit: int | None = None

    def __init__(self, kv_threshold: float = 0.8, queue_threshold: float = 5.0, scale_up_threshold: float = 0.85,
                 scale_down_boundary: float = 0.70, min_replicas: int = 1, max_replicas: int = 100,
                 engine_interval_s: float = 60.0) -> None:
        self.kv_t, self.q_t = kv_threshold, queue_threshold
        self.up_t, self.down_b = scale_up_threshold, scale_down_boundary
        self.engine_interval_s = engine_interval_s
        self.k2_history: deque[float] = deque(maxlen=K2_HISTORY)
        self.wanted: int | None = None  # the desired replicas WVA exports
        self.next_engine: float | None = None
        self.params = HpaParams(target_average_value=1.0, min_replicas=min_replicas, max_replicas=max_replicas,
                                scale_up_window_seconds=0, scale_down_window_seconds=0,
                                scale_up_policies=(ScalingPolicy("Pods", 10, 15),),
                                scale_down_policies=(ScalingPolicy("Pods", 10, 15),))
        self.state = HpaState()
        self.last: HpaDecision | None = None

    def capacity(self, p: PodMetrics) -> float:
        """min(k1, k2) of one pod (`computeReplicaCapacity`, `computeK2`)."""
        kv = p.kv or 0.0
        if (p.waiting or 0.0) >= self.q_t and kv > 0:
            self.k2_history.append(kv)
            k2 = kv
        elif self.k2_history:
            k2 = sum(self.k2_history) / len(self.k2_history)
        else:
            k2 = self.kv_t
        return min(self.kv_t, k2)

    def analyze(self, view: ClusterView) -> int | None:
        """The replicas WVA wants (None: no ready pod reports, no decision)."""
        pods = [p for p in view.ready if p.kv is not None and p.waiting is not None]
        if not pods:
            return None
        per_replica = statistics.median(self.capacity(p) for p in pods)
        demand = sum(pod_demand(p) for p in pods)
        ready, current = len(view.ready), len(view.ready) + len(view.in_flight)
        if per_replica <= 0:
            return current
        required = demand / self.up_t - current * per_replica  # anticipated supply: ready + pending
        spare = ready * per_replica - demand / self.down_b
        if required > 0:
            return current + math.ceil(required / per_replica - 1e-9)
        if spare > 0:
            return max(1, current - math.floor(spare / per_replica + 1e-9))
        return current

    def propose(self, view: ClusterView) -> tuple[int | None, float | None]:
        if self.wanted is None:
            return None, None  # no exported value yet: the HPA has no metric
        status = len(view.ready) + len(view.in_flight)
        return external_average_value_replicas(status, float(self.wanted), 1.0, self.params.tolerance)

    def decide(self, view: ClusterView, now: float) -> int:
        if self.next_engine is None or now >= self.next_engine - 1e-9:
            wanted = self.analyze(view)
            self.wanted = wanted if wanted is not None else self.wanted
            self.next_engine = now + self.engine_interval_s
        self.last, self.state = hpa_sync(self.params, view.spec_replicas, lambda: self.propose(view), self.state, now)
        return self.last.desired_replicas
