"""A static fleet sized for the peak."""

from __future__ import annotations

from autoscaler.baselines.view import ClusterView


class StaticPeak:
    """A fixed fleet sized for the peak (what most GPU fleets run): `replicas` forever."""

    name = "static-peak"
    interval_s = 60.0

    def __init__(self, replicas: int) -> None:
        self.replicas = replicas

    def decide(self, view: ClusterView, now: float) -> int:
        return self.replicas
