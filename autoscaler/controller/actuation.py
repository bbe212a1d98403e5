"""Actuation: what one decision writes, the write, and the policy state it leaves.

A tick is observe -> decide -> `plan` -> `write` -> `settle` -> record:

* `plan` (pure) turns the decision and what was read (the Deployment's spec replicas, an HPA
  scaling it, dry run, leadership) into a `Plan`: the replicas to write, or why nothing is;
* `write` carries a plan out through the Kubernetes adapter: for a scale-down, first the
  pod-deletion-cost marks of the pods to remove (`deletion_cost`, best effort: the scale-down
  goes ahead whatever they gave, docs/scale-down.md); then the one scale write of a tick,
  conditional on the resourceVersion and UID of the Deployment the decision read (a 409 is
  never re-sent: the next tick reads and decides again, as HPA does), fenced by leader
  election before every try inside the adapter; its `Outcome` says what happened;
* `settle` (pure) is the policy state to keep after that outcome: a decision that was not
  carried out keeps the readings and the learning, not the scale events that did not happen.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from enum import StrEnum

from autoscaler.adapters.kubernetes import (
    Fence,
    KubeClient,
    KubeConflict,
    KubeError,
    KubeFenced,
    KubeServerError,
    KubeTimeout,
    KubeUnavailable,
)
from autoscaler.controller.deletion_cost import Marked, Marking
from autoscaler.controller.deletion_cost import apply as apply_marks
from autoscaler.policy import PolicyState


class Outcome(StrEnum):
    """What became of one plan."""

    HOLD = "hold"  # nothing to write: the Deployment already asks for the desired replicas
    DRY_RUN = "dry_run"  # decided and logged, never written
    STANDBY = "standby"  # not the leader: decided (state stays warm for a failover), never written
    SKIPPED_HPA = "skipped_hpa"  # an HPA scales this Deployment: never written
    PATCHED = "patched"  # the scale was written
    CONFLICT = "conflict"  # the Deployment changed since the decision read it (409): nothing written
    FENCED = "fenced"  # the Lease was lost between the plan and the patch: nothing sent
    FAILED = "failed"  # the write was refused: nothing written
    FAILED_MAYBE_SENT = "failed_maybe_sent"  # timeout, 5xx, no answer: the patch may have landed

    @property
    def action(self) -> str:
        """The `action` of the decision log line and of `TargetOutcome`."""
        if self is Outcome.FENCED:
            return "standby"
        if self in (Outcome.FAILED, Outcome.FAILED_MAYBE_SENT):
            return "error"
        return self.value


# The outcomes after which the decision stands as made (written, or nothing to write).
_CARRIED_OUT = frozenset({Outcome.HOLD, Outcome.PATCHED})


@dataclass(frozen=True)
class Plan:
    """What to write for one target this tick. `skip` is None when the scale is to be set to
    `desired`, else the outcome that stands without any write."""

    namespace: str
    deployment: str
    current: int  # the Deployment's spec replicas, as read this tick
    desired: int
    skip: Outcome | None
    resource_version: str = ""  # of the Deployment as read this tick: the write's precondition
    uid: str = ""
    marking: Marking | None = None  # a scale-down's pod-deletion-cost marks, written before the scale

    @property
    def direction(self) -> str:
        return "up" if self.desired > self.current else "down"


def plan(
    namespace: str, deployment: str, *, current: int, desired: int, dry_run: bool, leading: bool, hpa: str | None,
    resource_version: str = "", uid: str = "", marking: Marking | None = None,
) -> Plan:
    """The scale write of one decision, or why there is none. In this order: a follower never
    writes (dry run or not, it only decides); an HPA in charge is left alone (a dry run shadows
    it); a dry run writes nothing; no write when the replicas are already the desired ones.
    `marking` (`deletion_cost.choose`) is kept only for a scale-down that is to be written."""
    skip: Outcome | None = None
    if not leading and not dry_run:
        skip = Outcome.STANDBY
    elif hpa is not None and not dry_run:
        skip = Outcome.SKIPPED_HPA
    elif dry_run:
        skip = Outcome.DRY_RUN
    elif desired == current:
        skip = Outcome.HOLD
    keep = marking if skip is None and desired < current else None
    return Plan(namespace, deployment, current, desired, skip, resource_version, uid, keep)


@dataclass(frozen=True)
class Written:
    """The outcome of `write`, and the adapter's error when it failed."""

    outcome: Outcome
    error: KubeError | None = None
    marked: Marked | None = None  # what became of the plan's marks (None: it had none)


def write(kube: KubeClient, planned: Plan, fence: Fence | None) -> Written:
    """Carry `planned` out: no call at all when it skips; else its marks (`deletion_cost.apply`,
    best effort), then one `set_replicas` conditional on the Deployment the plan was made from,
    with `fence` asked before every try. Errors other than the adapter's propagate."""
    if planned.skip is not None:
        return Written(planned.skip)
    marked = None
    if planned.marking is not None:
        marked = apply_marks(kube, planned.namespace, planned.deployment, planned.marking, fence)
    try:
        kube.set_replicas(planned.namespace, planned.deployment, planned.desired,
                          resource_version=planned.resource_version, uid=planned.uid, fence=fence)
    except KubeError as exc:
        return Written(_failure(exc), exc, marked)
    return Written(Outcome.PATCHED, marked=marked)


def _failure(exc: KubeError) -> Outcome:
    """A write that failed after a try with no clear answer may have landed all the same,
    whatever the last try said (a 409 then may be our own earlier try)."""
    if exc.maybe_written or isinstance(exc, (KubeTimeout, KubeServerError, KubeUnavailable)):
        return Outcome.FAILED_MAYBE_SENT
    if isinstance(exc, KubeFenced):
        return Outcome.FENCED
    if isinstance(exc, KubeConflict):
        return Outcome.CONFLICT
    return Outcome.FAILED


def settle(new_state: PolicyState, old_state: PolicyState, outcome: Outcome) -> PolicyState:
    """The state to keep after `outcome`. Carried out: `new_state`. Not carried out (dry run,
    follower, HPA in charge, conflict, fenced, failed): the readings and the learning of `new_state`,
    the scale events and the plan of `old_state`. A failed write that may have landed counts
    its scale-down as done, which can only delay the next one."""
    if outcome in _CARRIED_OUT:
        return new_state
    kept = replace(
        new_state,
        scale_up_events=old_state.scale_up_events,
        scale_down_events=old_state.scale_down_events,
        planned_replicas=old_state.planned_replicas,
    )
    if outcome is Outcome.FAILED_MAYBE_SENT:
        kept = replace(kept, scale_down_events=new_state.scale_down_events)
    return kept
