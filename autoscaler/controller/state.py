"""What of a target's `PolicyState` must survive a restart or a failover, as one JSON entry of
the state ConfigMap: the scale events the rate limits count (a restart must not forget that a
pod was removed 15 s ago when one pod per 120 s is allowed), the learned lead times and the
learned SLO capacity with the headroom's growth statistics.

The one place that knows `PolicyState`'s field names for persistence: `to_record` and
`from_record`. Entries written by earlier versions (version 1: the lead times alone; version 2:
no SLO state; version 3: growth statistics measured over the lead time of the replicas asked for,
on the demand now, which are dropped: the headroom learns them anew over the next replica's lead
time, from the cold-start floor, keeping the learned capacity) are read.

    {"version": 4, "lead": {...LeadTimeState.to_dict()...},
     "scale_up_events": [[t, pods added], ...], "scale_down_events": [[t, pods removed], ...],
     "slo": {...SloState.to_dict(), rounded, without the demand readings...}}

The SLO state is kept rounded to `SLO_DIGITS` significant digits, its sample count capped at
what the headroom reads (`MIN_SAMPLES`), without its demand readings (they span about two of the
headroom's horizons and are refilled within them: after a restart the first growth sample waits
one horizon and its base averages the readings since), and with the probe's slow start kept as whether it has ended
(a restart during it starts its step over from the base; its count moves every probe tick):
the entry then changes only when what was learned moves by several percent, not at every
reading, so the ConfigMap is not rewritten every tick. Worked example: a learned 15,234.7 prompt
tokens/s is kept as 15,000; a headroom growth variance of 0.0123456 as 0.012; 57 samples as 20;
a slow start 5 probes in as 0, one that has ended as ended (None). The growth statistics are
kept without their time; after a restart the first sample only starts their clock
(`headroom.update_moments`), so what was learned carries on.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import replace
from typing import Any

from autoscaler.policy import LeadTimeState, PolicyState
from autoscaler.policy.headroom import MIN_SAMPLES
from autoscaler.policy.time_window import TimeWindow
from autoscaler.policy.types import SloState

VERSION = 4
GROWTH_REMEASURED = 3  # entries up to this version hold growth statistics of another horizon
SLO_DIGITS = 2
MAX_EVENTS = 10_000  # per direction and target: far more than any period holds at one tick a second


def to_record(state: PolicyState) -> dict[str, Any]:
    """The part of `state` to keep across restarts and failovers, as JSON-able data."""
    return {
        "version": VERSION,
        "lead": state.lead.to_dict(),
        "scale_up_events": [[t, n] for t, n in state.scale_up_events],
        "scale_down_events": [[t, n] for t, n in state.scale_down_events],
        "slo": kept_slo(state.slo).to_dict(),
    }


def _round(x: float) -> float:
    return float(f"{x:.{SLO_DIGITS}g}")


def kept_slo(slo: SloState) -> SloState:
    """What of the SLO state is persisted: rounded, without the demand readings (module docstring)."""
    cp, cg = slo.capacity_prompt_tokens_per_second, slo.capacity_generation_tokens_per_second
    return SloState(
        cold_start=slo.cold_start,
        capacity_prompt_tokens_per_second=None if cp is None else _round(cp),
        capacity_generation_tokens_per_second=None if cg is None else _round(cg),
        growth_mean=_round(slo.growth_mean),
        growth_variance=_round(slo.growth_variance),
        growth_samples=min(slo.growth_samples, MIN_SAMPLES),
        growth_updated_at=None,
        probe_doublings=None if slo.probe_doublings is None else 0,
    )


def from_record(record: Mapping[str, Any], onto: PolicyState | None = None) -> PolicyState:
    """`onto` (default: a fresh state) with what `record` kept: its scale events are added to
    those `onto` has (a union: an event either replica saw counts), its lead times used when
    `onto` has learned none. Raises ValueError on anything malformed (nothing half-read), an
    integer too large for a float included."""
    try:
        return _from_record(record, onto)
    except OverflowError as exc:
        raise ValueError(f"state entry: a number too large: {exc}") from None


def _from_record(record: Mapping[str, Any], onto: PolicyState | None) -> PolicyState:
    base = onto if onto is not None else PolicyState()
    if not isinstance(record, Mapping):
        raise ValueError("state entry: expected a mapping")
    version = record.get("version")
    ups: tuple[tuple[float, int], ...] = ()
    downs: tuple[tuple[float, int], ...] = ()
    slo = SloState()
    if version == 1:  # written before the scale events were kept: the lead times alone
        lead = LeadTimeState.from_dict(dict(record))
    elif version in (2, 3, VERSION):
        lead = LeadTimeState.from_dict(_mapping(record.get("lead"), "lead"))
        ups = _events(record.get("scale_up_events", []), "scale_up_events")
        downs = _events(record.get("scale_down_events", []), "scale_down_events")
        if version != 2:
            slo = SloState.from_dict(_mapping(record.get("slo"), "slo"))
        if version == GROWTH_REMEASURED:
            slo = replace(slo, growth_mean=0.0, growth_variance=0.0, growth_samples=0, growth_updated_at=None)
    else:
        raise ValueError(f"state entry: unknown version {version!r}")
    learned = base.lead.model_load_samples or base.lead.node_provision_samples
    slo_learned = base.slo.capacity_prompt_tokens_per_second is not None or base.slo.growth_samples > 0
    return replace(
        base,
        scale_up_events=_union(base.scale_up_events, ups),
        scale_down_events=_union(base.scale_down_events, downs),
        lead=base.lead if learned else lead,
        slo=base.slo if slo_learned else slo,
    )


def _mapping(value: Any, key: str) -> dict[str, Any]:
    if not isinstance(value, dict):
        raise ValueError(f"state entry: {key} must be a mapping")
    return value


def _events(value: Any, key: str) -> tuple[tuple[float, int], ...]:
    if not isinstance(value, list) or len(value) > MAX_EVENTS:
        raise ValueError(f"state entry: {key} must be a list of at most {MAX_EVENTS} [t, pods]")
    events = []
    for item in value:
        if (not isinstance(item, list) or len(item) != 2 or isinstance(item[0], bool)
                or not isinstance(item[0], (int, float)) or not math.isfinite(item[0])
                or isinstance(item[1], bool) or not isinstance(item[1], int) or not 0 < item[1] <= 100_000):
            raise ValueError(f"state entry: bad event {item!r} in {key}")
        events.append((float(item[0]), item[1]))
    return tuple(events)


def _union(mine: tuple[tuple[float, int], ...], kept: tuple[tuple[float, int], ...]) -> TimeWindow[int]:
    """Both histories, each event once, oldest first."""
    return TimeWindow(sorted(set(mine) | set(kept)))
