"""`static`: a fixed fleet, the reference every autoscaler has to beat on cost."""

from __future__ import annotations

from autoscaler.baselines.view import ClusterView


class StaticFleet:
    """A fixed fleet (what most GPU fleets run): `replicas` forever. The simulator sizes it as
    ceil(knob x the scenario's peak need) (`autoscaler.sim.policies.make_policy`)."""

    name = "static"
    interval_s = 60.0
    pod_concurrency_limit: int | None = None

    def __init__(self, replicas: int) -> None:
        self.replicas = replicas

    def decide(self, view: ClusterView, now: float) -> int:
        return self.replicas
