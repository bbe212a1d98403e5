"""The decision core: `decide(policy, observation, state, now) -> (decision, new_state)`.

Pure: no I/O, no clock, no globals. The live loop, the replay and the simulator all call this
one function. The steps, each in its own module with a worked example:

1. metric health (`health`)         5. capacity in flight (`in_flight`)
2. demand (`demand`)                6. stabilisation windows (`stabilize`)
3. lead time (`lead_time`)          7. rate limits and bounds (`limits`)
4. forecast (`forecast`)            8. rollout in progress (`rollout`)

Next to the demand of step 2, the SLO capacity step (`slo_capacity`, with `capacity_table` and
`headroom`) sizes the fleet from token demand, a capacity learned from vLLM's TTFT/TPOT
histograms and a headroom for the lead time; without the SLO series it is absent and the
other signals decide alone. See docs/slo-policy.md.

`sizing` runs steps 2 to 4 together; a `Recommendation` (`recommendation`) carries the replicas
asked for, and why they are held, from there to step 6; `outcome` builds the decision. Every
history kept in `PolicyState` is a `TimeWindow` (`time_window`).

Unhealthy data (missing, stale, NaN) never reads as zero and never lowers the replicas.
"""

from __future__ import annotations

from autoscaler.policy.health import assess_health
from autoscaler.policy.in_flight import assess_in_flight, plan_after
from autoscaler.policy.lead_time import estimate_lead_time, learn_lead_times
from autoscaler.policy.limits import apply_limits, record_event
from autoscaler.policy.outcome import decision, decision_values
from autoscaler.policy.params import PolicyParams
from autoscaler.policy.recommendation import (
    hold_on_partial_data,
    hold_while_slo_broken,
    recommend,
    wait_for_capacity_in_flight,
)
from autoscaler.policy.rollout import counted_in_flight, hold_for_rollout
from autoscaler.policy.sizing import size
from autoscaler.policy.stabilize import stabilize
from autoscaler.policy.types import Decision, Observation, PolicyState


def decide(
    policy: PolicyParams, observation: Observation, state: PolicyState, now: float
) -> tuple[Decision, PolicyState]:
    """Decide the desired replicas of one target for this tick.

    The body is this pipeline, a line or two an item, in this order (the steps are those of
    the module docstring, each with its worked example in its module):

    1. health: the ready pods whose samples can be trusted (step 1);
    2. lead time: learned from the pods seen, and estimated (step 3);
    3. capacity in flight: the pods on their way that count, none during a rollout (5, 8);
    4. sizing: the demand now (2), the SLO replicas, the lead time with or without a new
       node (3) and the demand one lead time later (4);
    5. the recommendation: the largest of the three, or the current replicas when there is no
       data or it is within the tolerance;
    6. never lower than the current replicas on partial data (1, and the SLO series), nor
       while the SLO is measured broken;
    7. the plan, while pods are in flight: no higher than it or the demand now (5);
    8. never lower than the current replicas during a rollout (8);
    9. the stabilisation windows, the current replicas standing in for an empty history (6);
    10. the rate limits and bounds (7);
    11. the new plan, on a scale-up (5); the decision, and the state for the next tick (the
        SLO step's learning in `PolicyState.slo`, persisted like the lead times).

    Worked example (defaults: 3 waiting per replica, KV target 0.8, model load 300 s, node
    300 s, scale-up +100% or +4 per 15 s): 2 ready pods each with 15 waiting, 8 running and
    KV 0.95, no throughput series; no free GPU; no history. Queue demand (30 + 16) / (8 + 3) =
    4.18, at most 2 + 2 (one more per pod queued above target): 4; KV demand 1.9 / 0.8 = 2.4;
    4 replicas; lead time 300 + 300 = 600 s (no free GPU). Scale up 2 -> 4, scale_up_queue.
    """
    current = observation.spec_replicas
    health = assess_health(observation.ready_pods, now, policy.stale_after_seconds)
    lead_state = learn_lead_times(state.lead, observation, now, policy)
    lead = estimate_lead_time(lead_state, policy)
    flight = assess_in_flight(counted_in_flight(observation), lead, now)
    sizing = size(policy, observation, state, health, flight.counted, lead, now)
    rec = recommend(sizing, observation, policy)
    rec = hold_on_partial_data(rec, current, sizing, health, now, policy)
    rec = hold_while_slo_broken(rec, current, sizing, policy)
    planned = state.planned_replicas if flight.counted else None  # a plan lasts while pods fly
    rec = wait_for_capacity_in_flight(rec, sizing, planned or current, current, flight, policy)
    rec = hold_for_rollout(rec, observation)
    stab = stabilize(
        state.recommendations or ((now, current),),  # HPA's maybeInitScaleDownStabilizationWindow
        rec.replicas, current, now, policy, policy.scale_down_window_lead_times * lead.total(True),
    )
    limited = apply_limits(stab.replicas, current, state.scale_up_events, state.scale_down_events, now, policy)
    planned = plan_after(planned, rec.replicas, limited.replicas, current)
    ups, downs = record_event(
        state.scale_up_events, state.scale_down_events, current, limited.replicas, now, policy
    )
    values = decision_values(observation, health, sizing, lead, flight, rec, stab, planned, policy)
    return decision(current, rec, stab, limited, sizing, values), PolicyState(  # positional, in field order
        stab.recommendations,  # recommendations
        ups,  # scale_up_events
        downs,  # scale_down_events
        sizing.load_history,
        sizing.throughput_history,
        sizing.arrival_history,
        planned,  # planned_replicas
        lead_state,  # lead
        sizing.slo_state if sizing.slo_state is not None else state.slo,  # slo
    )
