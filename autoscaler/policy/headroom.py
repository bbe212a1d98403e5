"""The SLO headroom: size for the load that can arrive within one lead time.

A replica asked for now serves one lead time H later; until then the fleet must carry whatever
the demand grows to. How much it grows over H is measured, not assumed: each tick, with a
reading at least H old, r = ln(D_now / D_then) is one sample of the demand's log-growth over H
(D: fleet token demand in cold-start replicas, `demand_units`, so that learning the capacity
does not move the history). Its exponentially weighted mean and variance (half-life in
seconds, weights from the `now` deltas) give the growth at the quantile the attainment target
implies: headroom = exp(max(0, mean + z_q x sd)), z_q = the standard normal quantile of the
target (2.33 at 0.99), at most `headroom_max_ratio`. Bursty traffic has a wide r: headroom;
smooth traffic a narrow one: little. A rising trend (diurnal ramp) moves the mean up.

Until `MIN_SAMPLES` samples, the sd is at least `COLD_START_SD` = 0.15 (demand up 16 % over
one lead time at one sd: at 0.99, headroom exp(2.33 x 0.15) = 1.42).

O(1) a tick: the history keeps readings at least H / 16 apart and only the newest reading at
least H old, so at most about 18 entries, and only its ends are looked at.
"""

from __future__ import annotations

import math
from dataclasses import replace
from statistics import NormalDist

from autoscaler.policy.time_window import Entries, TimeWindow
from autoscaler.policy.types import SloState

COLD_START_SD = 0.15
MIN_SAMPLES = 20
MAX_SAMPLES = 1_000_000  # the sample count is only compared with MIN_SAMPLES; capped to stay small
READINGS_PER_LEAD_TIME = 16


def demand_units(prompt_tokens_per_second: float, generation_tokens_per_second: float,
                 cold_start: tuple[float, float]) -> float:
    """Fleet token demand in cold-start replicas: p / Cp0 + g / Cg0.

    Worked example: 30,000 prompt and 4,500 generated tokens/s, cold start (15,000, 3,000):
    2 + 1.5 = 3.5.
    """
    return prompt_tokens_per_second / cold_start[0] + generation_tokens_per_second / cold_start[1]


def record_demand(history: Entries[float], now: float, demand: float, lead_seconds: float) -> TimeWindow[float]:
    """Keep the reading when the newest one is at least H / 16 old (else the history as it is),
    then `keep_one_reference`.

    Worked example: H = 160 s (spacing 10 s), readings at 800, 840 and 990; at now 1000 the 5.0
    is 10 s after 990: kept; 840 is 160 s old, so 800 (also >= H old) drops:
    ((840, ...), (990, ...), (1000, 5.0)). At now 995 instead: only 800 drops, nothing kept.
    """
    window = TimeWindow.of(history)
    if not window or now - window[-1][0] >= lead_seconds / READINGS_PER_LEAD_TIME:
        window = window.record_reading(now, demand, math.inf)
    return keep_one_reference(window, now, lead_seconds)


def keep_one_reference(history: Entries[float], now: float, lead_seconds: float) -> TimeWindow[float]:
    """Of the readings at least H old, only the newest: the reference of `log_growth`.

    Worked example: readings at 800, 840 and 990, H = 160 s, now 1000: 800 and 840 are both
    at least 160 s old; ((840, ...), (990, ...)) remain.
    """
    window = TimeWindow.of(history)
    start = 0
    while start + 1 < len(window) and now - window[start + 1][0] >= lead_seconds:
        start += 1
    return window if start == 0 else TimeWindow(window[start:])


def log_growth(history: Entries[float], now: float, demand: float, lead_seconds: float) -> float | None:
    """ln(D_now / D_then) against the oldest reading, when it is at least H old and both are
    positive; else None.

    Worked example: oldest reading (840, 2.0), H = 160 s, D_now 3.0 at 1000: ln 1.5 = 0.405.
    At now 990: None (150 s < H).
    """
    if not history or not 0.0 < demand < math.inf:
        return None
    t, then = history[0]
    if now - t < lead_seconds or then <= 0:
        return None
    return math.log(demand / then)


def update_moments(state: SloState, growth: float, now: float, half_life_seconds: float) -> SloState:
    """Exponentially weighted mean and variance of the log-growth; a sample's weight is
    1 - 2^(-dt / half-life), dt since the last sample (a first sample sets the mean).

    Worked example: mean 0.1, variance 0.01, updated 1800 s ago, half-life 1800 s: weight 0.5;
    a sample 0.3: delta 0.2, mean 0.2, variance 0.5 x (0.01 + 0.5 x 0.04) = 0.015.
    A sample at the same `now` as the last one changes nothing.
    """
    if state.growth_updated_at is None or state.growth_samples == 0:
        return replace(state, growth_mean=growth, growth_variance=0.0, growth_samples=1, growth_updated_at=now)
    dt = now - state.growth_updated_at
    if dt <= 0:
        return state
    weight = 1.0 - 2.0 ** (-dt / half_life_seconds)
    delta = growth - state.growth_mean
    return replace(
        state,
        growth_mean=state.growth_mean + weight * delta,
        growth_variance=(1.0 - weight) * (state.growth_variance + weight * delta * delta),
        growth_samples=min(MAX_SAMPLES, state.growth_samples + 1),
        growth_updated_at=now,
    )


def headroom_ratio(state: SloState, attainment_target: float, max_ratio: float) -> float:
    """exp(max(0, mean + z_q x sd)), at most `max_ratio`; sd at least `COLD_START_SD` until
    `MIN_SAMPLES` samples.

    Worked example: target 0.99 (z = 2.326), mean 0.05, variance 0.01 (sd 0.1), 50 samples:
    exp(0.05 + 0.2326) = 1.327. With 3 samples the sd is 0.15: exp(0.399) = 1.49. A mean of
    -0.5: exp(max(0, -0.27)) = 1. Variance 1: exp(2.38) capped to 2.
    """
    sd = math.sqrt(state.growth_variance)
    if state.growth_samples < MIN_SAMPLES:
        sd = max(sd, COLD_START_SD)
    z = NormalDist().inv_cdf(attainment_target)
    return min(max_ratio, math.exp(max(0.0, state.growth_mean + z * sd)))


def track_headroom(
    state: SloState, demand: float, now: float, lead_seconds: float, half_life_seconds: float
) -> SloState:
    """One tick of the headroom's readings: a growth sample against the reading one lead time
    old (when there is one), then this reading. Non-positive demand is not recorded (no log).

    Worked example: readings ((800, 1.0), (840, 2.0), (990, 2.5)), H = 160 s, demand 3.0 at
    1000, no sample yet: the reference is 840 (800 drops); growth ln 1.5 = 0.405 is the mean;
    history ((840, 2.0), (990, 2.5), (1000, 3.0)).
    """
    history = keep_one_reference(state.demand_history, now, lead_seconds)
    growth = log_growth(history, now, demand, lead_seconds)
    if growth is not None:
        state = update_moments(state, growth, now, half_life_seconds)
    if demand <= 0 or not math.isfinite(demand):
        return state if history is state.demand_history else replace(state, demand_history=history)
    return replace(state, demand_history=record_demand(history, now, demand, lead_seconds))
