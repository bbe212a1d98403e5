"""The recommendation: the replicas this tick asks for, before the windows and the limits.

One small value passed along the steps between the sizing (steps 2-4) and the stabilisation
(step 6). Each step returns it as it is or a new one. A hold pins it to the current replicas
and says why (the reason the decision reports when nothing else moves it), with the clamp the
hold reports, if any.
"""

from __future__ import annotations

from dataclasses import dataclass

from autoscaler.policy.demand import throughput_partial, whole_replicas
from autoscaler.policy.health import HealthReport
from autoscaler.policy.in_flight import InFlight, cap_for_in_flight
from autoscaler.policy.params import PolicyParams
from autoscaler.policy.sizing import Sizing
from autoscaler.policy.types import Clamp, Observation, Reason, fast_init


@fast_init
@dataclass(frozen=True)
class Recommendation:
    replicas: int
    hold: Reason | None = None  # why the replicas were pinned to the current ones, if they were
    clamp: Clamp | None = None  # the clamp that hold reports (unhealthy metrics, rollout)


def recommend(sizing: Sizing, observation: Observation, policy: PolicyParams) -> Recommendation:
    """The largest of the demand now, the forecast and the SLO replicas (`slo_capacity`), in
    whole replicas; the current replicas
    when there is nothing to read, or when that need is within the tolerance of the ready ones,
    unless it is above them while the SLO is measured broken (`slo_broken`): the tolerance
    keeps noise from moving the fleet, and a measured breach is not noise.

    Worked example: 4 replicas, 4 ready, tolerance 0.1. Demand 4.36 and forecast 4.2: 4.36 / 4
    is within 10 % of 1: hold at 4 (within tolerance). Demand 3.95, forecast 5.9: 6. No ready
    pod: hold at 4 (no ready pods); ready pods but none healthy: hold at 4 (metrics unhealthy,
    clamp unhealthy_metrics). SLO replicas 4.2 with TPOT attainment 0.98 against 0.99: 5;
    SLO replicas 3.8 then: hold at 4 (within tolerance).
    """
    current, ready = observation.spec_replicas, len(observation.ready_pods)
    if ready == 0:
        return Recommendation(current, Reason.HOLD_NO_READY_PODS)
    if sizing.forecast is None:
        return Recommendation(current, Reason.HOLD_METRICS_UNHEALTHY, Clamp.UNHEALTHY_METRICS)
    wanted = max(max(sizing.demand_replicas, sizing.forecast.replicas), sizing.slo_replicas)  # compiled: no call
    if abs(wanted / ready - 1.0) <= policy.tolerance_ratio and not (wanted > ready and slo_broken(sizing, policy)):
        return Recommendation(current, Reason.HOLD_WITHIN_TOLERANCE)
    return Recommendation(whole_replicas(wanted))


def slo_broken(sizing: Sizing, policy: PolicyParams) -> bool:
    """Whether the fleet's TTFT or TPOT attainment (`slo_capacity`, from enough requests) is
    below the target, and the breach is not one infeasible at low load (where more replicas
    would not help).

    Worked example, target 0.99: TTFT 0.7: yes; TTFT 1.0 and TPOT 0.98: yes; 0.995 and None:
    no; TTFT 0.7 flagged infeasible at low load: no; no SLO signal: no.
    """
    slo = sizing.slo
    if slo is None or slo.infeasible_at_low_load:
        return False
    target = policy.slo.attainment_target
    return any(a is not None and a < target for a in (slo.ttft_attainment, slo.tpot_attainment))


def hold_on_partial_data(
    rec: Recommendation, current: int, sizing: Sizing, health: HealthReport, now: float, policy: PolicyParams
) -> Recommendation:
    """Never down on partial data: a recommendation below the current replicas is held there
    when some ready pod is unhealthy (step 1), or when the rate model counted a healthy pod
    without a throughput series as finishing nothing (which may understate the arrivals), or
    when the SLO series are partial (some stale, NaN or missing: `slo_capacity`).

    Worked example: 4 replicas, recommendation 1, one pod's KV sample NaN: hold at 4 (metrics
    unhealthy, clamp unhealthy_metrics). Every pod healthy, batch model: the 1 stands; with a
    stale TTFT histogram on one pod: hold at 4. A recommendation of 6 stands whatever the data.
    """
    if rec.replicas >= current or sizing.demand is None:
        return rec
    partial = sizing.demand.queue_model == "rate" and throughput_partial(
        health.healthy, now, policy.stale_after_seconds
    )
    partial = partial or (sizing.slo is not None and sizing.slo.partial)
    if health.all_healthy and not partial:
        return rec
    return Recommendation(current, Reason.HOLD_METRICS_UNHEALTHY, Clamp.UNHEALTHY_METRICS)


def hold_while_slo_broken(rec: Recommendation, current: int, sizing: Sizing, policy: PolicyParams) -> Recommendation:
    """Never down while the SLO is measured broken: a recommendation below the current replicas
    is held there when the fleet's TTFT or TPOT attainment (`slo_capacity`, from enough
    requests) is below the target, unless the breach is an SLO infeasible at low load (more
    replicas would not help, so fewer may be right). The stabilisation window usually holds
    such a tick already; this holds it when the window has moved on (pods in flight longer than
    it, say).

    Worked example: 6 replicas, recommendation 5, TTFT attainment 0.7 against 0.99: hold at 6
    (slo broken). Attainment 0.995, or 0.7 flagged infeasible at low load: the 5 stands. A
    recommendation of 7 stands whatever the SLO.
    """
    if rec.replicas < current and slo_broken(sizing, policy):
        return Recommendation(current, Reason.HOLD_SLO_BROKEN)
    return rec


def wait_for_capacity_in_flight(
    rec: Recommendation, sizing: Sizing, planned: int, current: int, flight: InFlight, policy: PolicyParams
) -> Recommendation:
    """Step 5 on the recommendation (`cap_for_in_flight`): while pods are on their way, a
    scale-up goes no higher than the plan or the demand now. Capped to the current replicas,
    it is a hold. The SLO's demand now is its replicas without the headroom: the pods in flight
    answer the growth up to their own horizon, and each tick's headroom, a quantile on a fresh
    reading, would otherwise ratchet the fleet up while they load (letting it through cost 4 %
    more on the tuning slices for at most +0.4 points: docs/slo-policy.md, "The horizon and the
    recent mean").

    Worked example: current 9, plan 9, 7 pods loading, growth ratio 1.5; recommendation 15.
    Demand now 10: 10. Demand now 8: 9, the current replicas: hold (capacity in flight).
    """
    capped = cap_for_in_flight(
        rec.replicas, whole_replicas(max(sizing.demand_replicas, sizing.slo.base_replicas if sizing.slo else 0.0)),
        planned, current, flight,
        policy.forecast_max_growth_ratio,
    )
    if capped >= rec.replicas:
        return rec
    # capped below a recommendation above the current replicas: never a hold before
    return Recommendation(capped, Reason.HOLD_CAPACITY_IN_FLIGHT if capped == current else None)
