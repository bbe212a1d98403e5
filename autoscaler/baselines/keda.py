"""KEDA: a ScaledObject with a Prometheus trigger, on top of the HPA model (`hpa.hpa_sync`)."""

from __future__ import annotations

import math

from autoscaler.baselines.hpa import HpaDecision, HpaParams, HpaState, hpa_sync
from autoscaler.baselines.view import ClusterView


class Keda:
    """KEDA ScaledObject of the vLLM production-stack (docs/source/use_cases/autoscaling-keda.rst,
    helm `keda:` values): prometheus trigger on `vllm:num_requests_waiting`, threshold 5,
    pollingInterval 15 s, cooldownPeriod 360 s, minReplicaCount 1.

    KEDA hands the HPA an External metric with an AverageValue target (the threshold), so the
    HPA computes `GetExternalPerPodMetricReplicas`: ratio = sum / (5 * current replicas); outside
    the 10 % tolerance, ceil(sum / 5); then the same HPA sync and default behavior as `hpa-queue`
    (`autoscaler.baselines.hpa.hpa_sync`). cooldownPeriod only governs scaling to zero
    (minReplicaCount 0), so with min 1 it never acts. We sum the query
    (`sum(vllm:num_requests_waiting)`): KEDA's Prometheus scaler rejects a query that returns
    one series per pod; an empty answer reads as 0 (`ignoreNullValues`, default true:
    kedacore/keda-docs content/docs/2.10/scalers/prometheus.md). Example: 3 replicas, 40
    waiting in total: 40 / 15 = 2.7 > 1.1, so ceil(40 / 5) = 8."""

    name = "keda"
    interval_s = 15.0

    def __init__(self, threshold: float = 5.0, min_replicas: int = 1, max_replicas: int = 100,
                 tolerance: float = 0.1) -> None:
        self.threshold = threshold
        self.params = HpaParams(target_average_value=threshold, min_replicas=min_replicas,
                                max_replicas=max_replicas, tolerance=tolerance)
        self.state = HpaState()
        self.last: HpaDecision | None = None

    def propose(self, view: ClusterView) -> tuple[int | None, float | None]:
        current = max(view.spec_replicas, 1)
        total = sum(p.waiting for p in view.ready if p.waiting is not None)  # empty -> 0
        if abs(1.0 - total / (self.threshold * current)) > self.params.tolerance:
            return math.ceil(total / self.threshold - 1e-9), total / current
        return view.spec_replicas, total / current

    def decide(self, view: ClusterView, now: float) -> int:
        self.last, self.state = hpa_sync(self.params, view.spec_replicas, lambda: self.propose(view), self.state, now)
        return self.last.desired_replicas
