"""Step 5, capacity in flight: pods already on their way count toward the target.

Metrics come from ready pods only, so while new pods load, the queue on the ready ones keeps
growing: that is the very backlog the new pods were asked for. Reading it again every tick
and asking for more is HPA's cascade (2 -> 4 -> 8 -> 16 while pods load). So, while pods are
in flight, a scale-up goes no higher than the plan (the highest recommendation since they
were asked for; a rate limit may still be catching up to it) or the demand measured now,
whichever is higher; the forecast's extra on top of that waits for the pods. Only when the
demand now outgrows the plan by `forecast_max_growth_ratio` (the most the forecast would ever
have planned for) does the full recommendation stand. The forecast is capped on purpose: it
already shaped the plan, and right after a step its trend still rises with the estimate.

A pod in flight has an ETA: created + node provisioning + model load when it waits for a node,
scheduled + model load otherwise. A pod more than one lead time past its ETA is overdue (stuck:
no node will come, image pull failing...). It no longer counts as capacity.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from autoscaler.policy.lead_time import LeadTimeEstimate
from autoscaler.policy.types import PodInFlight, PodStage, fast_init


@fast_init
@dataclass(frozen=True)
class InFlight:
    counted: int  # pods on their way that count as capacity
    overdue: int
    by_stage: dict[str, int]
    latest_eta_seconds: float  # from now; 0 when none


def pod_eta(pod: PodInFlight, lead: LeadTimeEstimate) -> tuple[float, float]:
    """(ETA, expected total startup) of one pod in flight, in Unix seconds and seconds.

    Worked example: load 240 s, node 300 s. An UNSCHEDULABLE pod created at 1000 is due at
    1000 + 300 + 240 = 1540; a LOADING pod scheduled at 1100 is due at 1100 + 240 = 1340.
    """
    st = pod.startup
    if pod.stage is PodStage.UNSCHEDULABLE or st.scheduled_at is None:
        total = lead.node_provision_seconds + lead.model_load_seconds
        return st.created_at + total, total
    return st.scheduled_at + lead.model_load_seconds, lead.model_load_seconds


def assess_in_flight(pods: tuple[PodInFlight, ...], lead: LeadTimeEstimate, now: float) -> InFlight:
    """Count pods in flight, by stage, and drop the overdue ones.

    Worked example: load 240 s, node 300 s, now 2000. A LOADING pod scheduled at 1700 is due
    at 1940 (60 s late, still counted); one scheduled at 1500 was due at 1740 and is 260 s
    late, more than its 240 s expected startup: overdue, not counted.
    """
    if not pods:  # the usual tick
        return InFlight(0, 0, {}, 0.0)  # counted, overdue, by stage, latest ETA
    counted = 0
    overdue = 0
    by_stage: dict[str, int] = {}
    latest = 0.0
    for pod in pods:
        stage = pod.stage._value_  # the plain attribute: `.value` is a descriptor call
        by_stage[stage] = by_stage.get(stage, 0) + 1
        eta, expected = pod_eta(pod, lead)
        if now - eta > expected:
            overdue += 1
            continue
        counted += 1
        latest = max(latest, eta - now)
    return InFlight(counted, overdue, by_stage, max(0.0, latest))


def cap_for_in_flight(
    recommendation: int, demand_now: int, planned: int, current: int, in_flight: InFlight, growth_ratio: float
) -> int:
    """The recommendation, capped while pods are on their way.

    Worked example: a plan of 9 replicas, 7 of them loading, growth ratio 1.5 (so the plan is
    outgrown at ceil(9 * 1.5) = 14). A recommendation of 15 (forecast included) with a demand
    now of 10 becomes 10; with a demand now of 8 it becomes 9 (the plan); with a demand now of
    14 the 15 stands. Nothing in flight: the 15 stands.
    """
    if in_flight.counted == 0 or recommendation <= current:
        return recommendation
    if demand_now >= math.ceil(planned * growth_ratio):
        return recommendation
    return max(current, min(recommendation, max(planned, demand_now)))


def plan_after(planned: int | None, recommendation: int, desired: int, current: int) -> int | None:
    """The plan after this tick: on a scale-up, the highest of the plan, the recommendation
    and the replicas asked for (a rate limit may still be catching up to the recommendation);
    else the plan as it was.

    Worked example: 8 replicas, plan 9, recommendation 12 limited to 11: plan 12. No plan,
    4 -> 6: plan 6. A hold or a scale-down leaves a plan of 9 at 9, and no plan at none.
    """
    if desired > current:
        return max(planned or 0, recommendation, desired)
    return planned
