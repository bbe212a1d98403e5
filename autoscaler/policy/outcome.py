"""The outcome of one tick: the `Decision`, with the reason, the clamp and the values behind it."""

from __future__ import annotations

from typing import Any

from autoscaler.policy.demand import EPSILON, whole_replicas
from autoscaler.policy.health import HealthReport
from autoscaler.policy.in_flight import InFlight
from autoscaler.policy.lead_time import LeadTimeEstimate
from autoscaler.policy.limits import Limited
from autoscaler.policy.params import PolicyParams
from autoscaler.policy.recommendation import Recommendation
from autoscaler.policy.sizing import Sizing
from autoscaler.policy.slo_capacity import SloSignal
from autoscaler.policy.stabilize import Stabilized
from autoscaler.policy.types import Clamp, Decision, DecisionValues, Observation, Reason

_DRIVER_REASONS = {
    "queue": Reason.SCALE_UP_QUEUE,
    "kv_cache": Reason.SCALE_UP_KV_CACHE,
    "batch": Reason.SCALE_UP_BATCH,
}


def decision(
    current: int, rec: Recommendation, stab: Stabilized, limited: Limited, sizing: Sizing, values: DecisionValues
) -> Decision:
    """The decision of the tick: the limited replicas (step 7), with why and the values."""
    return Decision(  # positional: desired, current, reason, clamp, values (cheaper than keywords)
        limited.replicas,
        current,
        reason(current, limited, stab.replicas, rec, sizing),
        clamp(limited, stab.replicas, rec),
        values,
    )


def clamp(limited: Limited, stabilized: int, rec: Recommendation) -> Clamp | None:
    """The limit that bound the decision: a rate limit or bound (step 7), else the clamp of a
    hold, else the stabilisation window (step 6) that moved the recommendation.

    Worked example: a recommendation of 3 kept at 4 by the scale-down window:
    scale_down_window; 8 kept at 5 by the scale-up window: scale_up_window; a recommendation
    held during a rollout: rollout; the scale-down rate limit on top of the window:
    scale_down_rate; a recommendation of 4 that stands: None.
    """
    found = limited.clamp or rec.clamp
    if found is None and stabilized != rec.replicas:
        return Clamp.SCALE_DOWN_WINDOW if rec.replicas < stabilized else Clamp.SCALE_UP_WINDOW
    return found


def reason(current: int, limited: Limited, stabilized: int, rec: Recommendation, sizing: Sizing) -> Reason:
    """Why the decision is what it is.

    Worked example: 2 -> 5 with the queue driving a demand of 5: scale_up_queue; 2 -> 5 where
    the demand now is 2.5 and the forecast 5: scale_up_forecast; 1 -> 2 only because the
    minimum is 2: scale_up_min_replicas. 12 -> 8 under a maximum of 8: scale_down_max_replicas;
    5 -> 4: scale_down. 4 -> 4 with a recommendation of 3: hold_scale_down_window when the
    window held it (stabilised 4), hold_scale_down_rate when the rate limit did (stabilised 3).
    A held recommendation: its hold. 4 -> 4 with a recommendation of 6 that the scale-up rate
    limit, the up window, the maximum or the GPU budget kept at 4: hold_scale_up_limited (the
    clamp names which). Otherwise: hold_steady.
    """
    desired = limited.replicas
    if desired > current:
        return _scale_up_reason(desired, current, limited.clamp, rec, sizing)
    if desired < current:
        if limited.clamp in (Clamp.MAX_REPLICAS, Clamp.GPU_BUDGET) and stabilized >= current:
            return Reason.SCALE_DOWN_MAX_REPLICAS
        return Reason.SCALE_DOWN
    if rec.hold is not None:
        return rec.hold
    if rec.replicas < current:
        return Reason.HOLD_SCALE_DOWN_WINDOW if stabilized >= current else Reason.HOLD_SCALE_DOWN_RATE
    if rec.replicas > current:
        return Reason.HOLD_SCALE_UP_LIMITED
    return Reason.HOLD_STEADY


def _scale_up_reason(
    desired: int, current: int, limit_clamp: Clamp | None, rec: Recommendation, sizing: Sizing
) -> Reason:
    """The signal that asked for more: the minimum replicas, the SLO (when it asked for more
    than the others could), the forecast (when it asked for more than the demand now could), or
    the demand's driver (queue, KV cache or batch)."""
    demand, fc = sizing.demand, sizing.forecast
    if limit_clamp is Clamp.MIN_REPLICAS or demand is None or rec.replicas <= current:
        return Reason.SCALE_UP_MIN_REPLICAS
    others = max(demand.replicas, fc.replicas) if fc is not None else demand.replicas
    if sizing.slo_replicas > others + EPSILON and whole_replicas(others) < desired:
        return Reason.SCALE_UP_SLO
    if fc is not None and fc.replicas > demand.replicas + EPSILON and whole_replicas(demand.replicas) < desired:
        return Reason.SCALE_UP_FORECAST
    return _DRIVER_REASONS[demand.driver]


def bound_signal(sizing: Sizing) -> str:
    """The signal that set the replicas asked for: the SLO when it asks for more than the others,
    else the forecast when it asks for more than the demand now, else the demand's driver;
    none without a demand.

    Worked example: demand 4 (queue), forecast 5, SLO 5.5: slo; SLO 3: forecast; forecast 4
    and SLO 0: queue; no demand: none.
    """
    demand, fc = sizing.demand, sizing.forecast
    if demand is None:
        return "none"
    others = max(demand.replicas, fc.replicas) if fc is not None else demand.replicas
    if sizing.slo_replicas > others + EPSILON:
        return "slo"
    if fc is not None and fc.replicas > demand.replicas + EPSILON:
        return "forecast"
    return demand.driver


def decision_values(
    observation: Observation,
    health: HealthReport,
    sizing: Sizing,
    lead: LeadTimeEstimate,
    flight: InFlight,
    rec: Recommendation,
    stab: Stabilized,
    planned: int | None,
    policy: PolicyParams,
) -> DecisionValues:
    """The intermediate values of the tick, for logs, metrics and the CLI (0 where unread)."""
    ready = len(observation.ready_pods)
    demand, fc, slo = sizing.demand, sizing.forecast, sizing.slo
    values = {  # in field order; a dict and not ~50 keywords: matching those costs ~2 us a tick
        "ready_replicas": ready,
        "healthy_pods": len(health.healthy),
        "unhealthy_pods": {k: v.value for k, v in health.unhealthy.items()} if health.unhealthy else {},
        "waiting_total": demand.waiting_total if demand else 0.0,
        "running_total": demand.running_total if demand else 0.0,
        "kv_cache_usage_mean": demand.kv_usage_total / ready if demand and ready else 0.0,
        "saturated_pods": demand.saturated_pods if demand else 0,
        "completed_per_second": demand.completed_per_second if demand else None,
        "arrivals_per_second": demand.arrivals_per_second if demand else None,
        "replica_throughput_per_second": demand.replica_throughput_per_second if demand else None,
        "queue_model": demand.queue_model if demand else "none",
        "queue_replicas": demand.queue_replicas if demand else 0.0,
        "kv_replicas": demand.kv_replicas if demand else 0.0,
        "batch_replicas": demand.batch_replicas if demand else 0.0,
        "demand_replicas": sizing.demand_replicas,
        "load_now": demand.load if demand else 0.0,
        "load_slope_per_second": fc.slope_per_second if fc else 0.0,
        "forecast_load": fc.load if fc else 0.0,
        "forecast_replicas": fc.replicas if fc else 0.0,
        "model_load_seconds": lead.model_load_seconds,
        "node_provision_seconds": lead.node_provision_seconds,
        "lead_time_seconds": sizing.lead_time_seconds,
        "lead_time_learned": lead.model_load_learned,
        "pods_in_flight": flight.counted,
        "pods_in_flight_by_stage": flight.by_stage,
        "in_flight_eta_seconds": flight.latest_eta_seconds,
        "planned_replicas": planned,
        "recommendation": rec.replicas,
        "stabilized": stab.replicas,
        "scale_down_window_seconds": stab.down_window_seconds,
    }
    values.update(_slo_values(slo, sizing, policy) if slo is not None else _NO_SLO_VALUES)
    values["bound_signal"] = bound_signal(sizing)
    return DecisionValues.from_fields(values)


_NO_SLO_VALUES = {f: DecisionValues.__dataclass_fields__[f].default for f in (
    "slo_ttft_seconds", "slo_tpot_seconds", "slo_attainment_target", "ttft_attainment", "tpot_attainment",
    "prompt_tokens_per_second", "generation_tokens_per_second", "capacity_prompt_tokens_per_second",
    "capacity_generation_tokens_per_second", "capacity_learned", "slo_utilisation",
    "slo_infeasible_at_low_load", "slo_slack", "headroom_ratio", "headroom_horizon_seconds", "slo_replicas",
)}  # DecisionValues' defaults without an SLO signal


def _slo_values(slo: SloSignal, sizing: Sizing, policy: PolicyParams) -> dict[str, Any]:
    """The SLO step's values (`_NO_SLO_VALUES` without an SLO signal), in field order."""
    return {
        "slo_ttft_seconds": slo.ttft_bound_seconds,
        "slo_tpot_seconds": policy.slo.tpot_seconds,
        "slo_attainment_target": policy.slo.attainment_target,
        "ttft_attainment": slo.ttft_attainment,
        "tpot_attainment": slo.tpot_attainment,
        "prompt_tokens_per_second": slo.prompt_tokens_per_second,
        "generation_tokens_per_second": slo.generation_tokens_per_second,
        "capacity_prompt_tokens_per_second": slo.capacity[0],
        "capacity_generation_tokens_per_second": slo.capacity[1],
        "capacity_learned": slo.capacity_learned,
        "slo_utilisation": slo.utilisation,
        "slo_infeasible_at_low_load": slo.infeasible_at_low_load,
        "slo_slack": slo.slack,
        "headroom_ratio": sizing.slo_headroom_ratio,
        "headroom_horizon_seconds": sizing.headroom_horizon_seconds,
        "slo_replicas": sizing.slo_replicas,
    }
