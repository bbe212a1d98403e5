"""Step 8, rollout in progress: no scale-down, and the pods on their way are not capacity.

While the Deployment rolls out a new revision, its pods on their way are the new revision
replacing the old one (or surge pods): neither capacity in flight (step 5) nor anything the
demand asked for, so they are not counted. And the replicas never go down: the rollout, not the
load, moves the ready pods then, and a scale-down would only be undone once it is over.
"""

from __future__ import annotations

from autoscaler.policy.recommendation import Recommendation
from autoscaler.policy.types import Clamp, Observation, PodInFlight, Reason


def counted_in_flight(observation: Observation) -> tuple[PodInFlight, ...]:
    """The pods in flight that may count as capacity: none during a rollout.

    Worked example: 2 pods loading, no rollout: both; the same during a rollout: none.
    """
    return () if observation.rollout_in_progress else observation.pods_in_flight


def hold_for_rollout(rec: Recommendation, observation: Observation) -> Recommendation:
    """During a rollout, a recommendation below the current replicas is held there.

    Worked example: 4 replicas rolling out, recommendation 1: hold at 4 (rollout, clamp
    rollout). Recommendation 6: it stands. No rollout: the 1 stands.
    """
    current = observation.spec_replicas
    if observation.rollout_in_progress and rec.replicas < current:
        return Recommendation(current, Reason.HOLD_ROLLOUT, Clamp.ROLLOUT)
    return rec
