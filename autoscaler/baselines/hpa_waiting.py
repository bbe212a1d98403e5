"""`hpa-waiting`: the HPA of vLLM production-stack's autoscaling example, as it ships.

vllm-project/production-stack tutorials/10-horizontal-autoscaling.md with
tutorials/assets/hpa-10.yaml and observability/prom-adapter.yaml (main, 2025): prometheus-adapter
serves `vllm_num_requests_waiting` = `sum by(namespace) (vllm:num_requests_waiting)` as a custom
metric of the Namespace, and the HPA has one metric `type: Object` on it with
`target: {type: Value, value: 1}` ("scale up if the metric exceeds 1"), default behavior.

Kubernetes (pkg/controller/podautoscaler, release-1.30) computes an Object/Value metric with
`GetObjectMetricReplicas`: ratio = namespace total / target; within the 10 % tolerance hold,
else ceil(ratio x ready pods) (`autoscaler.baselines.hpa.object_value_replicas`), then the same
`reconcileAutoscaler` behavior as every HPA (`hpa.hpa_sync`: 300 s scale-down stabilization,
up max(+100 %, +4 pods) / down -100 % per 15 s), one sync every 15 s. The waiting gauge stays 0
until a replica's batch is full, so this HPA sits at min replicas, then jumps by the ratio x
ready pods once a queue forms: the naive configuration the reviewer of issue 14 described.

Not modelled: the custom metrics API answering NotFound while no vLLM series exists (modelled as
"metrics unavailable": hold, like the HPA), pods of other deployments in the namespace.
"""

from __future__ import annotations

from autoscaler.baselines.hpa import HpaDecision, HpaParams, HpaState, hpa_sync, object_value_replicas
from autoscaler.baselines.view import ClusterView


class HpaWaiting:
    """HPA on the Object metric "total waiting in the namespace", target Value `target`."""

    name = "hpa-waiting"
    interval_s = 15.0
    pod_concurrency_limit: int | None = None

    def __init__(self, target: float = 1.0, min_replicas: int = 1, max_replicas: int = 100,
                 tolerance: float = 0.1) -> None:
        self.params = HpaParams(target_average_value=target, min_replicas=min_replicas,
                                max_replicas=max_replicas, tolerance=tolerance, metric=("waiting",))
        self.state = HpaState()
        self.last: HpaDecision | None = None

    def propose(self, view: ClusterView) -> tuple[int | None, float | None]:
        scraped = [p.waiting for p in view.ready if p.waiting is not None]
        if not scraped:
            return None, None  # no series yet: the adapter has no value, the HPA does not scale
        total = float(sum(scraped))
        return object_value_replicas(view.spec_replicas, total, self.params.target_average_value,
                                     len(view.ready), self.params.tolerance), total

    def decide(self, view: ClusterView, now: float) -> int:
        self.last, self.state = hpa_sync(self.params, view.spec_replicas, lambda: self.propose(view), self.state, now)
        return self.last.desired_replicas
