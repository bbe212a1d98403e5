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
one lead time at one sd: at 0.99, headroom exp(2.33 x 0.15) = 1.42): a history of less than
about two lead times says too little about a jump the next lead time may bring (on the bursty
tuning hour the first 20 minutes grew at most x1.25 over a lead time, the next minute x1.47), so
a new fleet assumes bursty traffic until its samples are many. It costs smooth traffic those
first minutes (docs/slo-policy.md). The floor waits while the latency has slack (the SLO met
within half its bounds, `slo_capacity.with_slack`): such a fleet carries headroom of its own (a
fleet moved over from a larger static one, say), which a floor would double.

O(1) a tick: a reading (and a growth sample) is taken when the newest is at least H / 16 old,
and of the readings at least H old only the newest is kept, so the history holds at most about
18 entries and only its ends are looked at; between readings nothing is done.
"""

from __future__ import annotations

import math
from functools import lru_cache
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


Moments = tuple[float, float, int, float | None]  # (mean, variance, samples, updated at)


def update_moments(moments: Moments, growth: float, now: float, half_life_seconds: float) -> Moments:
    """Exponentially weighted mean and variance of the log-growth; a sample's weight is
    1 - 2^(-dt / half-life), dt since the last sample (a first sample sets the mean).

    Worked example: mean 0.1, variance 0.01, updated 1800 s ago, half-life 1800 s: weight 0.5;
    a sample 0.3: delta 0.2, mean 0.2, variance 0.5 x (0.01 + 0.5 x 0.04) = 0.015.
    A sample at the same `now` as the last one changes nothing.
    """
    mean, variance, samples, updated_at = moments
    if updated_at is None or samples == 0:
        return growth, 0.0, 1, now
    dt = now - updated_at
    if dt <= 0:
        return moments
    weight = 1.0 - 2.0 ** (-dt / half_life_seconds)
    delta = growth - mean
    return (mean + weight * delta, (1.0 - weight) * (variance + weight * delta * delta),
            min(MAX_SAMPLES, samples + 1), now)


@lru_cache(maxsize=16)
def normal_quantile(q: float) -> float:
    """The standard normal quantile z_q (a pure function, memoised: a handful of targets).

    Worked example: 0.99 -> 2.326; 0.5 -> 0.
    """
    return NormalDist().inv_cdf(q)


def headroom_ratio(state: SloState, attainment_target: float, max_ratio: float, cold_floor: bool = True) -> float:
    """exp(max(0, mean + z_q x sd)), at most `max_ratio`; sd at least `COLD_START_SD` until
    `MIN_SAMPLES` samples when `cold_floor` (False while the latency has slack).

    Worked example: target 0.99 (z = 2.326), mean 0.05, variance 0.01 (sd 0.1), 50 samples:
    exp(0.05 + 0.2326) = 1.327. With 3 samples the sd is 0.15: exp(0.399) = 1.49. A mean of
    -0.5: exp(max(0, -0.27)) = 1. Variance 1: exp(2.38) capped to 2. With 3 samples and no
    floor (slack): 1.327.
    """
    sd = math.sqrt(state.growth_variance)
    if cold_floor and state.growth_samples < MIN_SAMPLES:
        sd = max(sd, COLD_START_SD)
    z = normal_quantile(attainment_target)
    return min(max_ratio, math.exp(max(0.0, state.growth_mean + z * sd)))


def track_headroom(
    state: SloState, demand: float, now: float, lead_seconds: float, half_life_seconds: float
) -> SloState:
    """One reading of the demand, when the newest is at least H / 16 old (or there is none):
    a growth sample against the reading one lead time old, when there is one; the reading
    kept; of the readings at least H old only the newest (`keep_one_reference`). Between
    readings, and for a demand that is not positive and finite: the state as it is.

    Worked example: readings ((800, 1.0), (840, 2.0), (990, 2.5)), H = 160 s (spacing 10 s),
    demand 3.0 at 1000, no sample yet: the reference is 840 (800 drops); growth ln 1.5 = 0.405
    is the mean; history ((840, 2.0), (990, 2.5), (1000, 3.0)). At 995: as it is (5 s < 10 s).
    """
    history = state.demand_history
    if (history and now - history[-1][0] < lead_seconds / READINGS_PER_LEAD_TIME) or not 0.0 < demand < math.inf:
        return state
    history = keep_one_reference(history, now, lead_seconds)
    moments: Moments = (state.growth_mean, state.growth_variance, state.growth_samples, state.growth_updated_at)
    growth = log_growth(history, now, demand, lead_seconds)
    if growth is not None:
        moments = update_moments(moments, growth, now, half_life_seconds)
    return SloState(
        state.cold_start, state.capacity_prompt_tokens_per_second, state.capacity_generation_tokens_per_second,
        TimeWindow(history + ((now, demand),)), *moments, state.probe_doublings,
    )
