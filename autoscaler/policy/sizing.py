"""Steps 2 to 4 for one tick: the demand now, the SLO replicas (`slo_capacity`), the lead time
of a replica asked for now, and the demand one lead time later, with the readings they keep
(load, throughput, arrivals, the SLO state). The lead time counts the SLO replicas before their
headroom; the headroom covers the lead time of the next replica beyond them
(`headroom_horizon`).

With no ready pod, or none healthy (step 1), there is nothing to read: no demand, no forecast,
the readings unchanged, and the lead time of one replica.
"""

from __future__ import annotations

from dataclasses import dataclass

from autoscaler.policy.demand import (
    Demand,
    arrival_rate,
    compute_demand,
    fleet_throughput,
    mean_throughput,
    throughput_lost,
    whole_replicas,
)
from autoscaler.policy.forecast import Forecast, forecast, update_load_history
from autoscaler.policy.health import HealthReport
from autoscaler.policy.lead_time import LeadTimeEstimate, node_needed
from autoscaler.policy.params import PolicyParams
from autoscaler.policy.slo_capacity import SloSignal, add_headroom, assess_slo
from autoscaler.policy.time_window import Entries
from autoscaler.policy.types import (
    Observation,
    PolicyState,
    ReadyPod,
    SloState,
    fast_init,
)


@fast_init
@dataclass(frozen=True)
class Sizing:
    demand: Demand | None  # None: no ready pod, or none healthy
    forecast: Forecast | None  # None exactly when demand is
    demand_replicas: float  # demand.replicas (a property: the max of three), read once; else 0
    lead_time_seconds: float
    load_history: Entries[float]
    throughput_history: Entries[float]
    arrival_history: Entries[float]
    slo: SloSignal | None = None  # None: no SLO series (or no demand)
    slo_state: SloState | None = None  # the SLO step's state for the next tick; None = unchanged
    slo_replicas: float = 0.0  # the SLO signal's replicas with the headroom; 0 without one
    slo_headroom_ratio: float = 1.0
    headroom_horizon_seconds: float = 0.0  # the lead time the headroom covers (`headroom_horizon`); 0 without SLO


def size(
    policy: PolicyParams,
    observation: Observation,
    state: PolicyState,
    health: HealthReport,
    in_flight: int,
    lead: LeadTimeEstimate,
    now: float,
) -> Sizing:
    """Demand now (2), lead time (3) and forecast (4). The lead time includes a new node when
    the free GPUs cannot hold the replicas to add beyond the `in_flight` ones.

    Worked example: 2 ready pods with 15 waiting, 8 running, KV 0.95 and no throughput series;
    no free GPU, nothing in flight, no history; model load 300 s, node 300 s. Demand (batch
    model): min((30 + 16) / (8 + 3) = 4.18, 2 + 2 queued above target) = 4, KV 1.9 / 0.8 =
    2.375: 4 replicas. 2 to add with no free GPU: lead time 300 + 300 = 600 s. One reading is
    no trend: the forecast is the demand, 4. No ready pod: no demand, lead time 600 s.
    """
    ready = len(observation.ready_pods)
    if ready == 0 or not health.healthy:
        lead_seconds = lead.total(node_needed(observation.free_gpus, 1, policy.gpus_per_replica))
        return Sizing(None, None, 0.0, lead_seconds, state.load_history, state.throughput_history,
                      state.arrival_history)
    demand, loads, throughputs = read_demand(policy, health, ready, state, now)
    demand_replicas = demand.replicas
    series = observation.slo_series  # the pods' SLO series summed, when it sums these pods and all are healthy
    if series is not None and (series.pods is not observation.ready_pods or not health.all_healthy):
        series = None
    slo = assess_slo(policy, health.healthy, ready - len(health.warming), health.all_healthy, demand, state.slo, now,
                     series)
    asked = max(demand_replicas, slo.base_replicas) if slo is not None else demand_replicas
    to_add = max(0, whole_replicas(asked) - (ready + in_flight))
    lead_seconds = lead.total(node_needed(observation.free_gpus, to_add, policy.gpus_per_replica))
    horizon = headroom_horizon(observation.free_gpus, to_add, policy.gpus_per_replica, lead)
    ratio, slo_state = add_headroom(slo, policy, horizon, now) if slo is not None else (1.0, None)
    arrivals = state.arrival_history
    if demand.arrivals_per_second is not None:
        arrivals = update_load_history(arrivals, now, demand.arrivals_per_second, policy.forecast_window_seconds)
    if demand.queue_model == "rate" and demand.arrivals_per_second is not None:
        fc = forecast(arrivals, demand.arrivals_per_second, demand_replicas, lead_seconds, policy)
    else:
        fc = forecast(loads, demand.load, demand_replicas, lead_seconds, policy)
    return Sizing(demand, fc, demand_replicas, lead_seconds, loads, throughputs, arrivals, slo, slo_state,
                  slo.base_replicas * ratio if slo is not None else 0.0, ratio, horizon if slo is not None else 0.0)


def headroom_horizon(free_gpus: int | None, to_add: int, gpus_per_replica: int, lead: LeadTimeEstimate) -> float:
    """The headroom's horizon: the lead time of the next replica beyond the `to_add` asked for
    now, so a new node's provisioning counts whenever the free GPUs cannot hold it too, even
    when none is asked for yet. Growth within that time has no replica to meet it but the
    headroom's.

    Worked example: model load 90 s, node 300 s, one GPU a replica. No free GPU, nothing to add:
    390 s (the step's lead time is 90 s: nothing waits for a node); 1 free GPU, nothing to add:
    90 s; 1 free GPU, 1 to add: 390 s (the step's is 90 s: the one fits); 3 free, 2 to add: 90 s.
    """
    return lead.total(node_needed(free_gpus, to_add + 1, gpus_per_replica))


def read_demand(
    policy: PolicyParams, health: HealthReport, ready: int, state: PolicyState, now: float
) -> tuple[Demand, Entries[float], Entries[float]]:
    """Step 2 with its readings: (demand, load history, throughput history). The healthy pods
    stand in for the ready ones but the warming ones, which hold next to nothing and count as
    idle (step 1). Arrivals need the load's growth, so two load readings at least: the first
    tick after a start has one and would read a growing queue as steady.

    Worked example: 2 ready pods with 15 waiting, 8 running and 1.6 requests/s finished each;
    the load was 20 thirty seconds ago. Load now 2 x (15 + 8) = 46; throughput 3.2 requests/s;
    arrivals 3.2 + (46 - 20) / 30 = 4.07 requests/s, so the rate model: keep up 4.07 / 1.6 =
    2.54 replicas, drain help 2 x (15 - 3) / (1.6 x 120) = 0.125: 2.67.
    """
    served = ready - len(health.warming)
    window, stale = policy.forecast_window_seconds, policy.stale_after_seconds
    loads = update_load_history(state.load_history, now, _load(health.healthy, served), window)
    throughput = fleet_throughput(health.healthy, served, now, stale)
    throughputs = state.throughput_history
    arrivals: float | None = None
    window_throughput: float | None = None
    if throughput is not None:
        if not throughput_lost(health.healthy, now, stale):  # a rate read as 0 for want of it stays out
            throughputs = update_load_history(throughputs, now, throughput, window)
        if len(loads) >= 2:
            window_throughput = mean_throughput(throughputs or ((now, throughput),))
            arrivals = arrival_rate(loads, throughputs or ((now, throughput),), window_throughput)
    demand = compute_demand(
        health.healthy,
        served,
        arrivals,
        now,
        stale,
        target_waiting_per_replica=policy.target_waiting_per_replica,
        target_kv_cache_usage_ratio=policy.target_kv_cache_usage_ratio,
        saturated_waiting_per_replica=policy.saturated_waiting_per_replica,
        queue_drain_seconds=policy.queue_drain_seconds,
        target_running_per_replica=policy.target_running_per_replica,
        completed_per_second=throughput,
        max_batch_growth_ratio=policy.forecast_max_growth_ratio,
        window_completed_per_second=window_throughput,
    )
    return demand, loads, throughputs


def _load(healthy: tuple[ReadyPod, ...], ready: int) -> float:
    """Waiting + running over all ready pods, the healthy ones standing in for the rest.

    A plain loop adding from 0.0 in the order `sum` would (the same float; compiled, no list,
    no tuple a pod and no call of `sum`)."""
    total = 0.0
    for p in healthy:
        w, r = p.waiting, p.running
        total += w.value if w is not None else 0.0
        total += r.value if r is not None else 0.0
    return total * ready / len(healthy)
