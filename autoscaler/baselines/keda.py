"""KEDA: a ScaledObject with a Prometheus trigger on sum(waiting + running), over the HPA model.

Sources: kedacore/keda-docs content/docs/2.15/reference/scaledobject-spec.md (pollingInterval
30 s, cooldownPeriod 300 s, minReplicaCount 0, maxReplicaCount 100 by default), the Prometheus
scaler page (metricType AverageValue, ignoreNullValues true by default), operate/metrics-server;
kedacore/keda issue 2282 (the metrics server queries the scaler on every HPA request; caching with
`useCachedMetrics`); the HPA side is `autoscaler.baselines.hpa` (kubernetes release-1.30).

* KEDA creates an HPA with one External metric served by its metrics server, target type
  AverageValue = the trigger's `threshold`. The HPA (sync 15 s, default behavior) computes
  `GetExternalPerPodMetricReplicas`: ratio = value / (threshold x status replicas), outside the
  10 % tolerance ceil(value / threshold) (`hpa.external_average_value_replicas`), then the HPA's
  stabilization and rate limits (`hpa.hpa_sync`).
* The value: `sum(vllm:num_requests_waiting + vllm:num_requests_running)` (one series: the
  Prometheus scaler takes a single-value answer), evaluated on the 15 s scrapes; an empty answer
  (no pod scraped yet) reads 0 (`ignoreNullValues`).
* The metrics server queries the scaler on every HPA request unless `useCachedMetrics: true`,
  which serves the value the operator polled every `pollingInterval` (kedacore/keda issue 2282,
  KEDA >= 2.8): `use_cached_metrics` models that option (off by default, as KEDA ships).
* pollingInterval otherwise drives only activation (0 <-> 1) and cooldownPeriod only the scale to
  zero; with minReplicaCount >= 1 neither acts.

Example: 3 pods, 400 requests (waiting + running) in total, threshold 78: 400 / 234 = 1.71 >
1.1 -> ceil(400 / 78) = 6, and the HPA allows max(2 x 3, 3 + 4) = 7, so 6.
"""

from __future__ import annotations

from autoscaler.baselines.hpa import (
    HpaDecision,
    HpaParams,
    HpaState,
    external_average_value_replicas,
    hpa_sync,
)
from autoscaler.baselines.view import ClusterView


class Keda:
    """KEDA ScaledObject, Prometheus trigger `sum(waiting + running)`, AverageValue `threshold`."""

    name = "keda"
    interval_s = 15.0  # the HPA's sync period: it asks KEDA's metrics server every sync
    pod_concurrency_limit: int | None = None

    def __init__(self, threshold: float = 78.0, min_replicas: int = 1, max_replicas: int = 100,
                 tolerance: float = 0.1, polling_interval_s: float = 30.0, use_cached_metrics: bool = False) -> None:
        self.threshold = threshold
        self.params = HpaParams(target_average_value=threshold, min_replicas=min_replicas,
                                max_replicas=max_replicas, tolerance=tolerance, metric=("waiting", "running"))
        self.polling_interval_s = polling_interval_s
        self.use_cached_metrics = use_cached_metrics
        self.state = HpaState()
        self.last: HpaDecision | None = None
        self._cached: tuple[float, float] | None = None  # (polled at, value)

    @staticmethod
    def query(view: ClusterView) -> float:
        """`sum(vllm:num_requests_waiting + vllm:num_requests_running)` over the scraped pods
        (a pod not scraped yet has no series; no series at all: 0)."""
        return float(sum((p.waiting or 0.0) + (p.running or 0.0) for p in view.ready if p.waiting is not None))

    def value(self, view: ClusterView, now: float) -> float:
        if not self.use_cached_metrics:
            return self.query(view)
        if self._cached is None or now - self._cached[0] >= self.polling_interval_s:
            self._cached = (now, self.query(view))
        return self._cached[1]

    def propose(self, view: ClusterView, now: float) -> tuple[int | None, float | None]:
        status_replicas = len(view.ready) + len(view.in_flight)  # the Deployment's status.replicas
        return external_average_value_replicas(status_replicas, self.value(view, now), self.threshold,
                                               self.params.tolerance)

    def decide(self, view: ClusterView, now: float) -> int:
        self.last, self.state = hpa_sync(self.params, view.spec_replicas, lambda: self.propose(view, now),
                                         self.state, now)
        return self.last.desired_replicas
