"""The SLO headroom: size for the load that can arrive before a next replica serves.

A replica asked for after the demand has grown serves one horizon H later: the lead time of the
next replica beyond those asked for now, a new node's provisioning included when the free GPUs
cannot hold it (`sizing.headroom_horizon`). Until then the fleet must carry whatever the demand
grows to. How much it grows over H is measured, not assumed: each tick, with a reading at least
H old, r = ln(R_now / B_then) is one sample of the demand's log-growth over H (D: fleet token
demand in cold-start replicas, `demand_units`, so that learning the capacity does not move the
history; R: the mean of D over the last half of H, `recent_mean`, so that a blip of seconds
or a minute, which a queue absorbs, is not held as growth for a whole horizon; on a steady ramp
R lags D by about H / 4, so a sample reads about three quarters of the ramp's growth over H).
B is the base a
reading sizes from: the larger of its demand and the level, the mean demand of the horizon
before it (`reference_base`; the fleet is sized from B_now alike, `base_ratio`). Its exponentially
weighted mean and variance (half-life in seconds, weights from the `now` deltas) give the
growth at the quantile the attainment target implies: headroom = exp(max(0, mean + z_q x sd))
x B_now / D_now, z_q = the standard normal quantile of the target (2.33 at 0.99), at most
`headroom_max_ratio`. Bursty traffic has a wide r: headroom; smooth traffic a narrow one:
little. A rising trend (diurnal ramp) moves the mean up.

Why a base and not D_now: demand that jumps about a level (minute-scale noise) would otherwise
be multiplied by the growth quantile at its highest readings and sized short at its lowest,
and the scale-down window keeps the largest of those; sizing from max(D, level) leaves a dip
no shorter than the level and a spike or a step up sized at once. The samples are measured
against the same base, so the quantile still covers the demand one lead time on.

Until `MIN_SAMPLES` samples, the sd is at least `COLD_START_SD` = 0.15 (demand up 16 % over
one lead time at one sd: at 0.99, headroom exp(2.33 x 0.15) = 1.42): a history of less than
about two lead times says too little about a jump the next lead time may bring (on the bursty
tuning hour the first 20 minutes grew at most x1.25 over a lead time, the next minute x1.47), so
a new fleet assumes bursty traffic until its samples are many. It costs smooth traffic those
first minutes (docs/slo-policy.md). The floor waits while the latency has slack (the SLO met
within half its bounds, `slo_capacity.with_slack`): such a fleet carries headroom of its own (a
fleet moved over from a larger static one, say), which a floor would double.

O(1) a tick: a reading (and a growth sample) is taken when the newest is at least H / 16 old;
of the readings at least H old only the newest and those within H before it are kept, so the
history holds about 35 entries at one horizon (up to ~55 measured while the horizon switches
between load and load + node); the level sums at most those of one horizon.
"""

from __future__ import annotations

import math
from functools import lru_cache
from statistics import NormalDist

from autoscaler.policy.time_window import Entries, TimeWindow
from autoscaler.policy.types import MAX_GROWTH_MEAN, SloState

MAX_EXPONENT = 700.0  # math.exp overflows past ~709.78; any exponent this large is the cap
COLD_START_SD = 0.15
MIN_SAMPLES = 20
MAX_SAMPLES = 1_000_000  # the sample count is only compared with MIN_SAMPLES; capped to stay small
READINGS_PER_LEAD_TIME = 16
RECENT_SHARE = 0.5  # a growth sample's numerator: the mean demand of the last half lead time


def demand_units(prompt_tokens_per_second: float, generation_tokens_per_second: float,
                 cold_start: tuple[float, float]) -> float:
    """Fleet token demand in cold-start replicas: p / Cp0 + g / Cg0.

    Worked example: 30,000 prompt and 4,500 generated tokens/s, cold start (15,000, 3,000):
    2 + 1.5 = 3.5.
    """
    return prompt_tokens_per_second / cold_start[0] + generation_tokens_per_second / cold_start[1]


def reference_index(history: Entries[float], now: float, lead_seconds: float) -> int | None:
    """The index of the newest reading at least H old: the reference of the growth samples
    (None: none is).

    Worked example: readings at 800, 840 and 990, H = 160 s: at 1000, 1 (840); at 970, 0 (800);
    at 950, None.
    """
    found = None
    for i, (t, _) in enumerate(history):
        if now - t < lead_seconds:
            break
        found = i
    return found


def reference_base(history: Entries[float], index: int, lead_seconds: float) -> tuple[int, float]:
    """(the index of the oldest reading within H before reading `index`, the base of reading
    `index`). The base is what a reading sizes from: the larger of its demand and the level, the
    mean of the readings within H before it (itself included). Noise around a level is not
    taken as the place to grow from (a dip would size short, a spike twice); a step up is, at
    once. Readings older than the first index are no longer needed.

    Worked example: readings (650, 1.0), (700, 2.0), (800, 4.0), (840, 3.0), H = 160 s: for 840
    (index 3) the readings since 680 count, level (2 + 4 + 3) / 3 = 3.0: (1, 3.0); for 800
    (index 2) 650 counts too, level (1 + 2 + 4) / 3 = 2.33, base 4.0: (0, 4.0).
    """
    t_ref, d_ref = history[index]
    oldest = t_ref - lead_seconds
    total, first = 0.0, index
    for i in range(index, -1, -1):
        t, d = history[i]
        if t < oldest:
            break
        total += d
        first = i
    return first, max(d_ref, total / (index - first + 1))


def base_ratio(history: Entries[float], now: float, demand: float, lead_seconds: float) -> float:
    """Base over demand now, >= 1: what the headroom multiplies besides the growth, so that the
    fleet is sized on max(demand, level) as the growth samples were measured from. The level is
    the mean of the readings within H of `now` and `demand` itself unless the newest reading is
    it (taken at `now`).

    Worked example: readings (830, 4.0), (900, 3.0), (990, 2.5), H = 160 s, demand 2.5 at 1000
    (the reading at 990 is the newest; 830 is more than H old): level (3.0 + 2.5 + 2.5) / 3 =
    2.667, ratio 1.067; demand 4.0: level 3.167 below it, ratio 1.
    """
    if not 0.0 < demand < math.inf:
        return 1.0
    total, count = (0.0, 0) if history and history[-1][0] == now else (demand, 1)
    oldest = now - lead_seconds
    for t, d in reversed(history):
        if t < oldest:
            break
        total += d
        count += 1
    return max(1.0, total / count / demand)


Moments = tuple[float, float, int, float | None]  # (mean, variance, samples, updated at)


def update_moments(moments: Moments, growth: float, now: float, half_life_seconds: float) -> Moments:
    """Exponentially weighted mean and variance of the log-growth; a sample's weight is
    1 - 2^(-dt / half-life), dt since the last sample (a first sample sets the mean).

    Moments restored after a restart (samples, no time: the state ConfigMap does not keep it)
    are kept: the first sample after it only starts the clock.

    Worked example: mean 0.1, variance 0.01, updated 1800 s ago, half-life 1800 s: weight 0.5;
    a sample 0.3: delta 0.2, mean 0.2, variance 0.5 x (0.01 + 0.5 x 0.04) = 0.015.
    A sample at the same `now` as the last one changes nothing. Restored (0.1, 0.01, 20
    samples, no time), a sample 0.3 at 1000: (0.1, 0.01, 20, 1000).
    """
    mean, variance, samples, updated_at = moments
    if samples == 0:
        return growth, 0.0, 1, now
    if updated_at is None:
        return mean, variance, samples, now
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
    exponent = max(0.0, state.growth_mean + z * sd)
    return min(max_ratio, math.exp(exponent)) if exponent < MAX_EXPONENT else max_ratio


def log_growth(demand: float, base: float) -> float:
    """ln(demand / base) for two positive finite numbers, within +/-MAX_GROWTH_MEAN: the
    logarithms apart when the ratio would overflow or underflow (1e300 / 1e-300), and a growth
    beyond e^100 in one lead time (no demand does that) held at it, so that the moments stay
    finite and within what a persisted state may hold.

    Worked example: (3.0, 2.0): 0.405; (1e300, 1e-300): 100 (1381.6 held).
    """
    ratio = demand / base
    growth = math.log(ratio) if 0.0 < ratio < math.inf else math.log(demand) - math.log(base)
    return max(-MAX_GROWTH_MEAN, min(MAX_GROWTH_MEAN, growth))


def recent_mean(history: Entries[float], now: float, demand: float, lead_seconds: float) -> float:
    """The mean of the demand now and the readings within half a lead time before it, the
    bound included (`RECENT_SHARE`): what a growth sample measures, so that a blip of seconds or
    a minute is not taken as growth that lasts (the fleet is still sized on the demand now,
    `base_ratio`).

    Worked example: readings (900, 2.0), (960, 3.0), (990, 4.0), demand 5.0 at 1000, H = 40 s
    (20 s back): (4.0 + 5.0) / 2 = 4.5; H = 240 s (120 s): (2 + 3 + 4 + 5) / 4 = 3.5.
    """
    oldest = now - lead_seconds * RECENT_SHARE
    mean, count = demand, 1
    for t, d in reversed(history):
        if t < oldest:
            break
        count += 1
        mean += (d - mean) / count  # a running mean: no sum to overflow near 1e308
    return mean


def track_headroom(
    state: SloState, demand: float, now: float, lead_seconds: float, half_life_seconds: float
) -> SloState:
    """One reading of the demand, when the newest is at least H / 16 old (or there is none):
    a growth sample ln(recent mean / base) against the base of the newest reading at least H old, when
    there is one (`reference_index`, `reference_base`); the reading kept; of the older readings
    only that reference and those its base averages. Between readings, and for a demand that is
    not positive and finite: the state as it is.

    Worked example: readings ((800, 1.0), (840, 2.0), (990, 2.5)), H = 160 s (spacing 10 s),
    demand 3.0 at 1000, no sample yet: the reference is 840, its base max(2.0, (1.0 + 2.0) / 2)
    = 2.0; the recent mean (2.5 + 3.0) / 2 = 2.75 (990 is within H / 2): growth ln 1.375
    = 0.318 is the mean; 800 stays (within H before 840): history
    ((800, 1.0), (840, 2.0), (990, 2.5), (1000, 3.0)). At 995: as it is (5 s < 10 s).
    """
    history = state.demand_history
    if (history and (now - history[-1][0] < lead_seconds / READINGS_PER_LEAD_TIME or now <= history[-1][0])
            or not 0.0 < demand < math.inf):
        return state
    moments: Moments = (state.growth_mean, state.growth_variance, state.growth_samples, state.growth_updated_at)
    window = TimeWindow.of(history)
    ref = reference_index(window, now, lead_seconds)
    if ref is not None:
        first, base = reference_base(window, ref, lead_seconds)
        window = TimeWindow(window[first:]) if first else window
        moments = update_moments(moments, log_growth(recent_mean(window, now, demand, lead_seconds), base), now,
                                 half_life_seconds)
    return SloState(
        state.cold_start, state.capacity_prompt_tokens_per_second, state.capacity_generation_tokens_per_second,
        TimeWindow(window + ((now, demand),)), *moments, state.probe_doublings,
    )
