"""HPA on CPU utilisation, the default `kubectl autoscale`."""

from __future__ import annotations

from autoscaler.baselines.view import ClusterView


class HpaCpu:
    """HPA v2 on CPU utilisation (the default `kubectl autoscale`, 80 %): a vLLM pod's CPU sits
    far below its request while the GPU saturates (one busy Python core of many requested), so
    it never scales. Returns the minimum replicas forever. Not on the scoreboard (a constant, not
    a model of the HPA's arithmetic); kept for the scenarios that still list it."""

    name = "hpa-cpu"
    interval_s = 15.0
    pod_concurrency_limit: int | None = None

    def __init__(self, min_replicas: int = 1) -> None:
        self.min_replicas = min_replicas

    def decide(self, view: ClusterView, now: float) -> int:
        return max(self.min_replicas, 1)
