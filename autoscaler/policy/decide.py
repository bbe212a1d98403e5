"""The decision core: `decide(policy, observation, state, now) -> (decision, new_state)`.

Pure: no I/O, no clock, no globals. The live loop, the replay and the simulator all call this
one function. The steps, each in its own module with a worked example:

1. metric health (`health`)         5. capacity in flight (`in_flight`)
2. demand (`demand`)                6. stabilisation windows (`stabilize`)
3. lead time (`lead_time`)          7. rate limits and bounds (`limits`)
4. forecast (`forecast`)            8. rollout in progress: no scale-down, surge pods ignored

Unhealthy data (missing, stale, NaN) never reads as zero and never lowers the replicas.
"""

from __future__ import annotations

import math

from autoscaler.policy.demand import (
    Demand,
    arrival_rate,
    compute_demand,
    fleet_throughput,
    throughput_partial,
)
from autoscaler.policy.forecast import Forecast, forecast, update_load_history
from autoscaler.policy.health import assess_health
from autoscaler.policy.in_flight import assess_in_flight, cap_for_in_flight
from autoscaler.policy.lead_time import (
    estimate_lead_time,
    learn_lead_times,
    node_needed,
)
from autoscaler.policy.limits import apply_limits, record_event
from autoscaler.policy.params import PolicyParams
from autoscaler.policy.stabilize import stabilize
from autoscaler.policy.types import (
    Clamp,
    Decision,
    DecisionValues,
    Observation,
    PolicyState,
    ReadyPod,
    Reason,
)

_EPS = 1e-9


_MAX_REPLICAS = 1_000_000  # beyond any bound; keeps absurd readings finite


def _ceil(x: float) -> int:
    if not x < _MAX_REPLICAS:  # also NaN
        return _MAX_REPLICAS
    return math.ceil(x - _EPS)


def decide(
    policy: PolicyParams, observation: Observation, state: PolicyState, now: float
) -> tuple[Decision, PolicyState]:
    """Decide the desired replicas of one target for this tick.

    Worked example (defaults: 3 waiting per replica, KV target 0.8, model load 300 s, node
    300 s, scale-up +100% or +4 per 15 s): 2 ready pods each with 15 waiting, 8 running and
    KV 0.95; no free GPU; no history. Queue demand (30 + 16) / (8 + 3) = 4.18, KV demand
    1.9 / 0.8 = 2.4, so 4.18 -> 5 replicas; lead time 300 + 300 = 600 s (no free GPU).
    Scale up 2 -> 5, reason scale_up_queue.
    """
    current = observation.spec_replicas
    lead_state = learn_lead_times(state.lead, observation, now, policy)
    lead = estimate_lead_time(lead_state, policy)

    # Step 8 (part): during a rollout the pods on their way are the new revision replacing
    # the old one (or surge): neither capacity nor demand.
    in_flight_pods = () if observation.rollout_in_progress else observation.pods_in_flight
    flight = assess_in_flight(in_flight_pods, lead, now)
    health = assess_health(observation.ready_pods, now, policy.stale_after_seconds)
    ready = len(observation.ready_pods)

    demand: Demand | None = None
    fc: Forecast | None = None
    load_history = state.load_history
    arrival_history = state.arrival_history
    throughput_history = state.throughput_history
    planned = state.planned_replicas if flight.counted else None
    lead_seconds = lead.total(node_needed(observation.free_gpus, 1, policy.gpus_per_replica))
    demand_replicas = 0.0  # demand.replicas (a property: the max of three), read once
    hold: Reason | None = None  # why the recommendation was pinned to the current replicas
    hold_clamp: Clamp | None = None

    if ready == 0:
        recommendation, hold = current, Reason.HOLD_NO_READY_PODS
    elif not health.healthy:
        recommendation, hold, hold_clamp = current, Reason.HOLD_METRICS_UNHEALTHY, Clamp.UNHEALTHY_METRICS
    else:
        # the pods the healthy ones stand in for: warming pods (just ready, not scraped yet)
        # hold next to nothing and count as idle (step 1, health.py)
        served = ready - len(health.warming)
        load_now = _load(health.healthy, served)
        load_history = update_load_history(state.load_history, now, load_now, policy.forecast_window_seconds)
        throughput = fleet_throughput(health.healthy, served, now, policy.stale_after_seconds)
        arrivals: float | None = None
        if throughput is not None:
            throughput_history = update_load_history(
                state.throughput_history, now, throughput, policy.forecast_window_seconds
            )
            # arrivals need the load's growth: two readings at least (the first tick after a
            # start has one, and would read a growing queue as steady)
            if len(load_history) >= 2:
                arrivals = arrival_rate(load_history, throughput_history or ((now, throughput),))
        demand = compute_demand(
            health.healthy,
            served,
            arrivals,
            now,
            policy.stale_after_seconds,
            target_waiting_per_replica=policy.target_waiting_per_replica,
            target_kv_cache_usage_ratio=policy.target_kv_cache_usage_ratio,
            saturated_waiting_per_replica=policy.saturated_waiting_per_replica,
            queue_drain_seconds=policy.queue_drain_seconds,
            target_running_per_replica=policy.target_running_per_replica,
            completed_per_second=throughput,
            max_batch_growth_ratio=policy.forecast_max_growth_ratio,
        )
        demand_replicas = demand.replicas
        to_add = max(0, _ceil(demand_replicas) - (ready + flight.counted))
        lead_seconds = lead.total(node_needed(observation.free_gpus, to_add, policy.gpus_per_replica))
        if demand.arrivals_per_second is not None:
            arrival_history = update_load_history(
                state.arrival_history, now, demand.arrivals_per_second, policy.forecast_window_seconds
            )
        if demand.queue_model == "rate" and demand.arrivals_per_second is not None:
            fc = forecast(arrival_history, demand.arrivals_per_second, demand_replicas, lead_seconds, policy)
        else:
            fc = forecast(load_history, demand.load, demand_replicas, lead_seconds, policy)
        wanted = max(demand_replicas, fc.replicas)
        if abs(wanted / ready - 1.0) <= policy.tolerance_ratio:
            recommendation, hold = current, Reason.HOLD_WITHIN_TOLERANCE
        else:
            recommendation = _ceil(wanted)
        partial = demand.queue_model == "rate" and throughput_partial(
            health.healthy, now, policy.stale_after_seconds
        )
        if (not health.all_healthy or partial) and recommendation < current:
            recommendation, hold, hold_clamp = current, Reason.HOLD_METRICS_UNHEALTHY, Clamp.UNHEALTHY_METRICS
        capped = cap_for_in_flight(
            recommendation, _ceil(demand_replicas), planned or current, current, flight,
            policy.forecast_max_growth_ratio,
        )
        if capped < recommendation:
            recommendation = capped
            if recommendation == current:
                hold, hold_clamp = Reason.HOLD_CAPACITY_IN_FLIGHT, None

    if observation.rollout_in_progress and recommendation < current:
        recommendation, hold, hold_clamp = current, Reason.HOLD_ROLLOUT, Clamp.ROLLOUT

    # Like HPA's maybeInitScaleDownStabilizationWindow: with no history (first tick, or after a
    # restart) the current replicas count as a recommendation made now, so a fresh controller
    # never scales down before a full window of its own readings.
    history = state.recommendations or ((now, current),)
    # the window covers the lead time with a new node: what is given back may need one to return
    down_window_floor = policy.scale_down_window_lead_times * lead.total(True)
    stab = stabilize(history, recommendation, current, now, policy, down_window_floor)
    limited = apply_limits(
        stab.replicas, current, state.scale_up_events, state.scale_down_events, now, policy
    )
    desired = limited.replicas
    if desired > current:
        planned = max(planned or 0, recommendation, desired)

    clamp = limited.clamp or hold_clamp
    if clamp is None and stab.replicas != recommendation:
        clamp = Clamp.SCALE_DOWN_WINDOW if recommendation < stab.replicas else Clamp.SCALE_UP_WINDOW

    reason = _reason(desired, current, recommendation, stab.replicas, limited.clamp, hold, demand, fc)
    ups, downs = record_event(state.scale_up_events, state.scale_down_events, current, desired, now, policy)

    values = DecisionValues(
        ready_replicas=ready,
        healthy_pods=len(health.healthy),
        unhealthy_pods={k: v.value for k, v in health.unhealthy.items()} if health.unhealthy else {},
        saturated_pods=demand.saturated_pods if demand else 0,
        completed_per_second=demand.completed_per_second if demand else None,
        arrivals_per_second=demand.arrivals_per_second if demand else None,
        replica_throughput_per_second=demand.replica_throughput_per_second if demand else None,
        queue_model=demand.queue_model if demand else "none",
        waiting_total=demand.waiting_total if demand else 0.0,
        running_total=demand.running_total if demand else 0.0,
        kv_cache_usage_mean=demand.kv_usage_total / ready if demand and ready else 0.0,
        queue_replicas=demand.queue_replicas if demand else 0.0,
        kv_replicas=demand.kv_replicas if demand else 0.0,
        batch_replicas=demand.batch_replicas if demand else 0.0,
        demand_replicas=demand_replicas,
        load_now=demand.load if demand else 0.0,
        load_slope_per_second=fc.slope_per_second if fc else 0.0,
        forecast_load=fc.load if fc else 0.0,
        forecast_replicas=fc.replicas if fc else 0.0,
        model_load_seconds=lead.model_load_seconds,
        node_provision_seconds=lead.node_provision_seconds,
        lead_time_seconds=lead_seconds,
        lead_time_learned=lead.model_load_learned,
        pods_in_flight=flight.counted,
        pods_in_flight_by_stage=flight.by_stage,
        in_flight_eta_seconds=flight.latest_eta_seconds,
        planned_replicas=planned,
        recommendation=recommendation,
        stabilized=stab.replicas,
        scale_down_window_seconds=max(policy.scale_down_window_seconds, down_window_floor),
    )
    decision = Decision(desired_replicas=desired, current_replicas=current, reason=reason, clamp=clamp, values=values)
    new_state = PolicyState(
        recommendations=stab.recommendations,
        scale_up_events=ups,
        scale_down_events=downs,
        load_history=load_history,
        arrival_history=arrival_history,
        throughput_history=throughput_history,
        planned_replicas=planned,
        lead=lead_state,
    )
    return decision, new_state


def _load(healthy: tuple[ReadyPod, ...], ready: int) -> float:
    """Waiting + running over all ready pods, the healthy ones standing in for the rest."""
    total = 0.0
    for p in healthy:
        for sample in (p.waiting, p.running):
            total += sample.value if sample is not None else 0.0
    return total * ready / len(healthy)


def _reason(
    desired: int,
    current: int,
    recommendation: int,
    stabilized: int,
    limit_clamp: Clamp | None,
    hold: Reason | None,
    demand: Demand | None,
    fc: Forecast | None,
) -> Reason:
    if desired > current:
        if limit_clamp is Clamp.MIN_REPLICAS or demand is None or recommendation <= current:
            return Reason.SCALE_UP_MIN_REPLICAS
        if fc is not None and fc.replicas > demand.replicas + _EPS and _ceil(demand.replicas) < desired:
            return Reason.SCALE_UP_FORECAST
        return {
            "queue": Reason.SCALE_UP_QUEUE,
            "kv_cache": Reason.SCALE_UP_KV_CACHE,
            "batch": Reason.SCALE_UP_BATCH,
        }[demand.driver]
    if desired < current:
        if limit_clamp in (Clamp.MAX_REPLICAS, Clamp.GPU_BUDGET) and stabilized >= current:
            return Reason.SCALE_DOWN_MAX_REPLICAS
        return Reason.SCALE_DOWN
    if hold is not None:
        return hold
    if recommendation < current:
        return Reason.HOLD_SCALE_DOWN_WINDOW if stabilized >= current else Reason.HOLD_SCALE_DOWN_RATE
    return Reason.HOLD_STEADY
