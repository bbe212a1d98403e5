"""The state ConfigMap's entry of a target: what of `PolicyState` survives a restart or a
failover (`controller/state.py`)."""

from __future__ import annotations

import json
from typing import Any

import pytest

from autoscaler.controller.state import from_record, to_record
from autoscaler.policy import LeadTimeState, PolicyState

LEAD = LeadTimeState(model_load_samples=((100.0, 240.0),), recorded_pods=("qwen-0",))
STATE = PolicyState(
    recommendations=((1000.0, 3),),
    scale_up_events=((990.0, 2),),
    scale_down_events=((1000.0, 1),),
    load_history=((1000.0, 30.0),),
    lead=LEAD,
)


def test_round_trip_keeps_what_the_limits_and_the_lead_times_need() -> None:
    record = json.loads(json.dumps(to_record(STATE)))  # through JSON, as stored
    assert record["version"] == 2
    back = from_record(record)
    assert (back.scale_up_events, back.scale_down_events, back.lead) == (
        STATE.scale_up_events, STATE.scale_down_events, LEAD)
    assert back.recommendations == () and back.load_history == ()  # readings are taken again


def test_version_1_entries_hold_the_lead_times() -> None:
    back = from_record(LEAD.to_dict())
    assert back.lead == LEAD and back.scale_down_events == ()


def test_merged_onto_a_state_in_memory_every_event_counts_once() -> None:
    mine = PolicyState(scale_down_events=((1000.0, 1),), lead=LeadTimeState(model_load_samples=((5.0, 100.0),)))
    kept = to_record(PolicyState(scale_down_events=((1000.0, 1), (1100.0, 1)), lead=LEAD))
    merged = from_record(kept, onto=mine)
    assert merged.scale_down_events == ((1000.0, 1), (1100.0, 1))
    assert merged.lead == mine.lead  # what this replica learned wins over the stored copy
    assert from_record(kept, onto=PolicyState()).lead == LEAD


@pytest.mark.parametrize("record", [
    [],
    {"version": 3},
    {"version": 2, "lead": [], "scale_up_events": [], "scale_down_events": []},
    {"version": 2, "lead": {"version": 1}, "scale_down_events": [[1.0, -1]]},
    {"version": 2, "lead": {"version": 1}, "scale_down_events": [[float("nan"), 1]]},
    {"version": 2, "lead": {"version": 1}, "scale_down_events": [[1.0, 1.5]]},
    {"version": 2, "lead": {"version": 1}, "scale_down_events": [[1.0, True]]},
    {"version": 2, "lead": {"version": 1}, "scale_down_events": "[[1.0, 1]]"},
    {"version": 2, "lead": {"version": 1}, "scale_down_events": [[1.0, 1]] * 10_001},
])
def test_a_malformed_entry_is_refused_whole(record: Any) -> None:
    with pytest.raises(ValueError):
        from_record(record)
