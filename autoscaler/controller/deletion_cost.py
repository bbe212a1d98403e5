"""Graceful scale-down: which pods the ReplicaSet should remove, told through
`controller.kubernetes.io/pod-deletion-cost` (docs/scale-down.md).

Before a scale-down from N to M replicas, `choose` (pure) picks the ready pods the ReplicaSet
will remove and ranks them by their work (running + waiting requests, from the samples this
tick read); `apply` (best effort) writes the annotations, each patch conditional on the pod's
resourceVersion as listed this tick and fenced by leader election.

The ReplicaSet controller removes, in order: unscheduled, then pending, then not-ready pods,
and only then ready pods, lowest pod-deletion-cost first (kubernetes pkg/controller/
controller_utils.go `ActivePodsWithRanks.Less`; replicaset.go `getPodsToDelete`). So of M
pods kept, the ready ones removed are `ready - M` (not-ready pods go first whatever their cost);
those are the ones marked.

The cost scheme: the k chosen pods get -k ... -1, least work first (lowest = removed first),
ties broken by the newest pod first (as the ReplicaSet does); every other pod keeps the
default 0. Each marked pod also carries MARKED_AT (when, RFC 3339): a mark is this
controller's, and at the next scale-down a marked pod that is not chosen again gets both
annotations removed, so that an old mark (a scale-down that was marked but not written, or
an operator's `kubectl scale` later) never ranks a pod that has become busy below an idle one.
A pod already carrying the cost it should have is not written again.

Missing data is never read as idle: a ready pod without a fresh, finite running *and* waiting
sample is never chosen (it keeps cost 0, like the pods that stay).
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field

import structlog

from autoscaler.adapters.kubernetes import Fence, KubeClient, KubeError, KubeFenced
from autoscaler.adapters.kubernetes.objects import PodInfo, format_time
from autoscaler.policy.health import sample_health
from autoscaler.policy.types import Observation, SampleHealth

DELETION_COST = "controller.kubernetes.io/pod-deletion-cost"
MARKED_AT = "vllm-queue-autoscaler.io/deletion-cost-marked-at"

_LOG = structlog.get_logger("autoscaler")


@dataclass(frozen=True)
class Mark:
    """One pod write: `cost` set (with MARKED_AT), or None: both annotations removed."""

    pod: str
    resource_version: str
    cost: int | None
    work: float | None = None  # running + waiting, as read this tick (None: not chosen, or unknown)


@dataclass(frozen=True)
class Marking:
    """What `choose` decided for one scale-down: the pods to remove, least work first; the
    writes that get them there (only what differs from what is on the pods); why."""

    chosen: tuple[str, ...]
    writes: tuple[Mark, ...]
    reason: str  # marked | no_ready_pod_removed | rollout_in_progress | no_fresh_metrics
    unknown: tuple[str, ...] = ()  # ready pods without fresh running and waiting samples: never chosen
    at: float = 0.0  # when it was decided (the tick's clock): MARKED_AT


@dataclass
class Marked:
    """What `apply` did: pods written, pods not written with the error, and whether it stopped
    because this replica is no longer the leader."""

    written: list[str] = field(default_factory=list)
    failed: dict[str, str] = field(default_factory=dict)
    fenced: bool = False


def work_of(observation: Observation, now: float, stale_after_seconds: float) -> dict[str, float | None]:
    """Running + waiting of each ready pod, None when either sample is missing, stale or not finite."""
    out: dict[str, float | None] = {}
    for pod in observation.ready_pods:
        samples = (pod.running, pod.waiting)
        fresh = all(s is not None and sample_health(s, now, stale_after_seconds) is SampleHealth.FRESH
                    for s in samples)
        total = sum(s.value for s in samples if s is not None) if fresh else math.nan
        out[pod.name] = total if fresh and math.isfinite(total) else None
    return out


def choose(pods: Iterable[PodInfo], observation: Observation, desired: int, now: float,
           stale_after_seconds: float) -> Marking:
    """The marks of a scale-down to `desired` replicas (pure).

    Worked example: ready pods a (4 running, 1 waiting), b (0, 0), c (2, 0), scale 3 -> 1: two
    ready pods go; b (work 0) gets -2, c (work 2) gets -1, a keeps 0. With a fourth pod still
    loading and a scale 4 -> 1, the same two marks: the ReplicaSet removes the loading pod first
    whatever its cost, then the two ready pods with the lowest cost (3 ready - 1 kept = 2).
    """
    alive = [p for p in pods if not p.terminating and not p.finished]
    ready = [p for p in alive if p.ready]
    k = len(ready) - desired
    ours = [p for p in ready if MARKED_AT in p.annotations and p.resource_version]
    if k <= 0:
        return Marking((), (), "no_ready_pod_removed", at=now)
    if observation.rollout_in_progress:
        # several ReplicaSets share the scale-down (proportional scaling): which pods each removes
        # is not this one ranking; old marks are dropped, no new ones written
        return Marking((), _resets(ours, ()), "rollout_in_progress", at=now)
    work = work_of(observation, now, stale_after_seconds)
    # a pod listed without a resourceVersion cannot be written conditionally: never chosen
    known = [p for p in ready if work.get(p.name) is not None and p.resource_version]
    unknown = tuple(sorted(p.name for p in ready if work.get(p.name) is None))
    if not known:
        return Marking((), _resets(ours, ()), "no_fresh_metrics", unknown, now)
    known.sort(key=lambda p: (work[p.name], -p.created_at, p.name))
    chosen = known[:k]
    n = len(chosen)
    writes = list(_resets(ours, {p.name for p in chosen}))
    for i, p in enumerate(chosen):
        cost = i - n  # -n for the least work ... -1
        if p.annotations.get(DELETION_COST) != str(cost) or MARKED_AT not in p.annotations:
            writes.append(Mark(p.name, p.resource_version, cost, work[p.name]))
    return Marking(tuple(p.name for p in chosen), tuple(writes), "marked", unknown, now)


def _resets(ours: Sequence[PodInfo], keep: Iterable[str]) -> tuple[Mark, ...]:
    kept = set(keep)
    return tuple(Mark(p.name, p.resource_version, None) for p in ours if p.name not in kept)


def apply(kube: KubeClient, namespace: str, deployment: str, marking: Marking, fence: Fence | None) -> Marked:
    """Write `marking` (resets first, then marks), one conditional patch per pod, one try each.
    Best effort: a refused write (403 without the RBAC, 409, 5xx...) is logged and the next
    pod is tried; the scale-down goes ahead whatever happens here (docs/scale-down.md). Stops
    at the first fenced write: this replica no longer leads, and the scale write will not go
    either."""
    done = Marked()
    stamp = format_time(marking.at)
    for mark in marking.writes:
        annotations: dict[str, str | None] = (
            {DELETION_COST: None, MARKED_AT: None} if mark.cost is None
            else {DELETION_COST: str(mark.cost), MARKED_AT: stamp})
        try:
            kube.annotate_pod(namespace, mark.pod, annotations, resource_version=mark.resource_version, fence=fence)
        except KubeFenced as exc:
            done.fenced = True
            done.failed[mark.pod] = str(exc)
            break
        except KubeError as exc:
            done.failed[mark.pod] = str(exc)
            continue
        done.written.append(mark.pod)
    log = _LOG.warning if done.failed else _LOG.info
    log("deletion_cost", namespace=namespace, deployment=deployment, reason=marking.reason,
        chosen=list(marking.chosen), unknown=list(marking.unknown), written=done.written, failed=done.failed,
        fenced=done.fenced,
        message=("pods ranked for removal by their work (controller.kubernetes.io/pod-deletion-cost)"
                 + ("; some marks could not be written: the ReplicaSet's own order decides for those"
                    if done.failed else "")))
    return done
