"""How a policy is driven: the one interface of the simulator and the replay.

* `Policy` - what the simulator drives (`autoscaler.sim.runner`): every `interval_s`, the
  `ClusterView` -> the desired replicas. Every baseline is one.
* `ObservationPolicy` - a `Policy` that reads no more than the live loop observes: it also
  takes an `Observation` -> (desired replicas, reason, detail), which is what the open-loop
  replay drives (`autoscaler.replay.open_loop`) tick by tick from a recording. Ours
  (`queue_lead.QueueLead`) and the HPA (`hpa.HpaQueue`) are; the replay runs those.
* `ObservationAdapter` - the base of those two: its `decide(view, now)` is its
  `__call__(view_observation(view), now)`, so the simulator and the replay go through the same
  code and the same policy state.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from typing import Generic, Protocol, TypeVar

from autoscaler.baselines.view import ClusterView, view_observation
from autoscaler.policy import Observation

# (desired replicas, reason, detail): the detail is the clamp (ours) or the limit (HPA), or None
Outcome = tuple[int, str, str | None]
P = TypeVar("P")  # parameters
S = TypeVar("S")  # state
D = TypeVar("D")  # decision


class Policy(Protocol):
    name: str
    interval_s: float

    def decide(self, view: ClusterView, now: float) -> int: ...


class ObservationPolicy(Policy, Protocol):
    gpus_per_replica: int
    needs: tuple[str, ...]  # the recorded series it reads: "waiting", "running", "kv"

    def __call__(self, observation: Observation, now: float) -> Outcome: ...


class ObservationAdapter(ABC, Generic[P, S, D]):
    """A policy of `Observation`s with its parameters, its state carried from tick to tick and its
    last decision, driven by the simulator through `view_observation`."""

    needs: tuple[str, ...]

    def __init__(self, name: str, params: P, state: S, interval_s: float, gpus_per_replica: int) -> None:
        self.name = name
        self.params = params
        self.state = state
        self.interval_s = interval_s
        self.gpus_per_replica = gpus_per_replica
        self.last: D | None = None

    @abstractmethod
    def __call__(self, observation: Observation, now: float) -> Outcome:
        """Decide on one observation: update `state` and `last`."""

    def decide(self, view: ClusterView, now: float) -> int:
        return self(view_observation(view), now)[0]
