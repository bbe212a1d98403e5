"""The state ConfigMap's entry of a target: what of `PolicyState` survives a restart or a
failover (`controller/state.py`)."""

from __future__ import annotations

import json
from dataclasses import replace
from typing import Any

import pytest

from autoscaler.controller.state import from_record, to_record
from autoscaler.policy import LeadTimeState, PolicyState
from autoscaler.policy.types import SloState

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
    assert record["version"] == 4
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
    {"version": 4},
    {"version": 5, "lead": {"version": 1}, "slo": {"version": 1}},  # unknown version
    {"version": 4, "lead": {"version": 1}},  # no slo
    {"version": 3, "lead": {"version": 1}},  # no slo
    {"version": 3, "lead": {"version": 1}, "slo": {"version": 1, "capacity_prompt_tokens_per_second": 1.0}},
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


SLO = SloState(cold_start=(15_000.0, 3_000.0), capacity_prompt_tokens_per_second=15_234.7,
               capacity_generation_tokens_per_second=2_876.54, demand_history=((900.0, 2.5), (960.0, 2.7)),
               growth_mean=0.0123456, growth_variance=0.0123456, growth_samples=57, growth_updated_at=960.0)


def test_the_headroom_s_growth_statistics_outlive_the_first_samples_after_a_restart() -> None:
    # Restored: mean 0.012, variance 0.012, 20 samples, no time. Readings every H / 16 (H = 160 s)
    # for two lead times give the first growth samples; the restored moments must carry on, not
    # be replaced by the first sample (found in review: 1 sample, variance 0, the cold floor
    # back, the headroom 28 % lower after every restart).
    from autoscaler.policy.headroom import track_headroom

    slo = from_record(json.loads(json.dumps(to_record(PolicyState(slo=SLO))))).slo
    for k in range(40):
        slo = track_headroom(slo, 2.0 + 0.01 * k, 10_000.0 + 10.0 * k, 160.0, 1800.0)
    assert slo.growth_samples > 20 and slo.growth_updated_at is not None
    assert slo.growth_variance > 0.005 and abs(slo.growth_mean - 0.012) < 0.01


def test_the_learned_slo_capacity_survives_rounded_without_its_readings() -> None:
    # The module docstring's example: 15,234.7 -> 15,000 (2 significant digits), 0.0123456 ->
    # 0.012, 57 samples -> 20 (all the headroom reads); the demand readings are taken again.
    record = json.loads(json.dumps(to_record(PolicyState(slo=SLO))))
    back = from_record(record).slo
    assert (back.capacity_prompt_tokens_per_second, back.capacity_generation_tokens_per_second) == (15_000.0, 2_900.0)
    assert (back.growth_mean, back.growth_variance, back.growth_samples) == (0.012, 0.012, 20)
    assert back.cold_start == SLO.cold_start and back.demand_history == () and back.growth_updated_at is None
    # Later readings that moved what was learned by less than the rounding write the same entry.
    nudged = SloState(SLO.cold_start, 15_030.0, 2_910.0, SLO.demand_history, 0.0119, 0.0124, 58, 975.0)
    assert to_record(PolicyState(slo=nudged)) == to_record(PolicyState(slo=SLO))


def test_the_probes_slow_start_survives_as_whether_it_has_ended() -> None:
    # The module docstring's example: 5 probes into the slow start is kept as 0 (a restart starts
    # its step over from the base, and the entry does not change at every probe); ended stays ended.
    for doublings, kept in ((5, 0), (0, 0), (None, None)):
        slo = replace(SLO, probe_doublings=doublings)
        record = json.loads(json.dumps(to_record(PolicyState(slo=slo))))
        assert from_record(record).slo.probe_doublings == kept
    assert to_record(PolicyState(slo=replace(SLO, probe_doublings=5))) == to_record(PolicyState(slo=SLO))
    assert to_record(PolicyState(slo=replace(SLO, probe_doublings=None))) != to_record(PolicyState(slo=SLO))


def test_what_this_replica_learned_of_the_slo_wins_and_version_2_starts_cold() -> None:
    kept = to_record(PolicyState(slo=SLO))
    mine = SloState(cold_start=(15_000.0, 3_000.0), capacity_prompt_tokens_per_second=9_000.0,
                    capacity_generation_tokens_per_second=2_000.0)
    assert from_record(kept, onto=PolicyState(slo=mine)).slo == mine
    assert from_record(kept, onto=PolicyState()).slo.capacity_prompt_tokens_per_second == 15_000.0
    v2 = {k: v for k, v in kept.items() if k != "slo"} | {"version": 2}
    assert from_record(v2).slo == SloState()


def test_version_3_keeps_the_capacity_and_drops_the_growth_statistics_of_another_horizon() -> None:
    # version 3 measured growth over the lead time of the replicas asked for (90 s when none was),
    # on the demand now; the headroom now covers the next replica's (with a node: 390 s): restored
    # as they were, 20 samples of a narrower spread would skip the cold-start floor
    v3 = to_record(PolicyState(slo=SLO)) | {"version": 3}
    slo = from_record(v3).slo
    assert slo.capacity_prompt_tokens_per_second == 15_000.0 and slo.capacity_generation_tokens_per_second == 2_900.0
    assert (slo.growth_mean, slo.growth_variance, slo.growth_samples, slo.growth_updated_at) == (0.0, 0.0, 0, None)
    assert from_record(to_record(PolicyState(slo=SLO))).slo.growth_samples == 20  # version 4: kept
