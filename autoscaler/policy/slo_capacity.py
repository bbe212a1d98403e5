"""The SLO capacity step: replicas from token demand and a capacity learned from vLLM's latency.

**Capacity is a region.** A replica at prompt rate p and generation rate g (tokens/s) uses
u = p / Cp + g / Cg of its SLO capacity: prefill and decode time-share the GPU. (Cp, Cg) starts
from the shipped table (`capacity_table`) and is learned online.

**Reading** (`read_slo`). From the healthy pods (step 1): fleet token rates, the healthy pods
with fresh rates standing in for the served ones (as the demand step does); the TTFT and TPOT
histograms of the pods that share the most common bucket bounds, merged (rates add). The
attainments are the shares of requests within the TTFT bound (`ttft_bound`: length-aware when
configured) and within the TPOT bound.

**Learning** (`learn_capacity`): the estimate moves only when prediction and observation
disagree, by at most `capacity_learning_max_step_ratio` per tick, and only from a histogram
with enough requests and a fleet whose data is whole:

* SLO met while u > 1: the replica carries more than we thought: grow both toward the load.
* SLO met with slack (latency at the target quantile within half the bound) at u >= 0.5:
  probe up by 1 % a tick. Without this, a cold start that is too low would never be corrected:
  the fleet is sized to keep u < 1, so "met at u > 1" would never be seen.
* SLO broken at 0.5 <= u < 1: shrink toward the load, Cp on a TTFT breach, Cg on a TPOT breach.
* SLO broken at u < 0.5: an SLO infeasible at low load (prompts too long for the bound, say):
  more replicas would not help, so nothing is learned and the decision flags it. Unless pods
  queue: then the replicas are overloaded and the estimate is far too high: shrink.
* SLO broken at u >= 1: expected; more replicas are coming. No change.

**Replicas** (`slo_replicas`): (P / Cp + G / Cg) x headroom, with token demand = served token
rates x arrivals / completions when the queue model has an arrival estimate (else served), and
the headroom of `headroom` for the lead time.

Absent signals (no pod has any of the SLO series) give no SLO signal: the other signals decide
exactly as before. Present but stale, NaN or missing on some pods: the SLO data is partial and
can never lower the replicas (`partial`), and nothing is learned.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace
from operator import le

from autoscaler.policy.capacity_table import cold_start_capacity
from autoscaler.policy.demand import Demand
from autoscaler.policy.headroom import demand_units, headroom_ratio, track_headroom
from autoscaler.policy.params import PolicyParams, SloParams
from autoscaler.policy.types import COLD_SLO_STATE, LatencyHistogram, MetricSample, ReadyPod, SloState, fast_init

LOW_LOAD_UTILISATION = 0.5  # broken below this: infeasible at low load, not a capacity estimate
SLACK_RATIO = 0.5  # met with slack: the target quantile's latency within this share of the bound
PROBE_STEP_RATIO = 1.01  # per tick, while met with slack


@fast_init
@dataclass(frozen=True)
class SloReading:
    """What the pods say this tick (fleet rates over the served pods; None where unknown)."""

    prompt_tokens_per_second: float | None
    generation_tokens_per_second: float | None
    ttft: LatencyHistogram | None  # merged over `ttft_pods` pods
    tpot: LatencyHistogram | None
    ttft_pods: int
    served: int  # the pods the fleet rates stand for
    partial: bool  # some SLO series present but unusable, or token rates missing on some pods


@fast_init
@dataclass(frozen=True)
class SloSignal:
    """The SLO step's outcome, for sizing, the decision values and the next state."""

    replicas: float  # headroom included; 0 when the token rates are unknown
    base_replicas: float  # without headroom
    prompt_tokens_per_second: float | None  # served, fleet
    generation_tokens_per_second: float | None
    capacity: tuple[float, float]  # (Cp, Cg) of one replica, after this tick's learning
    capacity_learned: bool
    ttft_bound_seconds: float
    ttft_attainment: float | None
    tpot_attainment: float | None
    utilisation: float | None
    infeasible_at_low_load: bool
    headroom_ratio: float
    partial: bool
    demand_units: float  # token demand in cold-start replicas (the headroom's reading)
    state: SloState


def _fresh_rate(sample: MetricSample | None, now: float, stale: float) -> float | None:
    if sample is None or not 0.0 <= sample.value < math.inf or now - sample.timestamp > stale:
        return None
    return sample.value


def _well_formed(h: LatencyHistogram, now: float, stale: float) -> bool:
    """`LatencyHistogram.health` is FRESH, the bounds' order left to `merge_histograms` (one
    check for the group): rates from >= 0 to finite, never decreasing (NaN fails `le`)."""
    rates = h.cumulative_per_second
    return (
        len(rates) == len(h.upper_bounds) > 0 and now - h.timestamp <= stale
        and rates[0] >= 0.0 and rates[-1] < math.inf and all(map(le, rates, rates[1:]))
    )


def merge_histograms(
    hists: list[LatencyHistogram], now: float, stale: float
) -> tuple[LatencyHistogram | None, int, bool]:
    """(merged histogram, pods merged, some histogram unusable). Only fresh, well-formed ones;
    of those, the ones with the most common bounds (the first seen on ties); rates add.

    Worked example: pods A, B with bounds (1, 2, +Inf) and rates (1, 3, 4), (2, 2, 2); pod C
    with bounds (0.5, +Inf): merged (1, 2, +Inf), (3, 5, 6) over 2 pods, nothing unusable. With
    B stale: A alone, 1 pod, unusable True.
    """
    good = [h for h in hists if _well_formed(h, now, stale)]
    bad = len(good) < len(hists)
    if not good:
        return None, 0, bad
    bounds = good[0].upper_bounds
    if any(h.upper_bounds != bounds for h in good):
        counts: dict[tuple[float, ...], int] = {}
        for h in good:
            counts[h.upper_bounds] = counts.get(h.upper_bounds, 0) + 1
        bounds = max(counts, key=lambda b: counts[b])  # dicts keep order: first seen on ties
        good = [h for h in good if h.upper_bounds == bounds]
    if bounds[-1] != math.inf or not all(map(le, bounds, bounds[1:])) or len(set(bounds)) < len(bounds):
        return None, 0, True
    if len(good) == 1:
        return good[0], 1, bad
    merged = tuple([sum(col) for col in zip(*[h.cumulative_per_second for h in good])])
    return LatencyHistogram(bounds, merged, now), len(good), bad


def read_slo(healthy: tuple[ReadyPod, ...], served: int, now: float, stale: float) -> SloReading | None:
    """The SLO series of the healthy pods; None when none of them has any.

    Worked example: 2 healthy pods of 3 served, with fresh prompt rates 1,000 and 2,000 and
    generation rates 300 and 500 tokens/s: 3,000 x 3 / 2 = 4,500 prompt and 1,200 generated
    tokens/s; no histogram: none merged, not partial.
    """
    ps, gs, ttfts, tpots, present = [], [], [], [], False
    for pod in healthy:
        p, g, ttft, tpot = pod.prompt_tokens_per_second, pod.generation_tokens_per_second, pod.ttft, pod.tpot
        if p is None and g is None and ttft is None and tpot is None:
            continue
        present = True
        fp, fg = _fresh_rate(p, now, stale), _fresh_rate(g, now, stale)
        if fp is not None and fg is not None:
            ps.append(fp)
            gs.append(fg)
        if ttft is not None:
            ttfts.append(ttft)
        if tpot is not None:
            tpots.append(tpot)
    if not present:
        return None
    ttft_m, ttft_pods, ttft_bad = merge_histograms(ttfts, now, stale)
    tpot_m, _, tpot_bad = merge_histograms(tpots, now, stale)
    scale = served / len(ps) if ps else 0.0
    return SloReading(
        sum(ps) * scale if ps else None, sum(gs) * scale if ps else None, ttft_m, tpot_m,
        ttft_pods, served, ttft_bad or tpot_bad or len(ps) < len(healthy),
    )


def ttft_bound(slo: SloParams, mean_prompt_tokens: float | None) -> float:
    """The TTFT bound: flat, or grown by `ttft_seconds_per_1k_prompt_tokens` per 1,000 tokens of
    the window's mean prompt (when known).

    Worked example: 2 s + 0.5 s per 1k tokens, mean prompt 4,000 tokens: 2 + 0.5 x 4 = 4 s;
    mean unknown: 2 s.
    """
    if mean_prompt_tokens is None or slo.ttft_seconds_per_1k_prompt_tokens == 0.0:
        return slo.ttft_seconds
    return slo.ttft_seconds + slo.ttft_seconds_per_1k_prompt_tokens * mean_prompt_tokens / 1000.0


def mean_prompt_tokens(reading: SloReading) -> float | None:
    """Mean prompt tokens per request: prompt tokens/s per pod over first tokens/s per pod (the
    TTFT histogram counts each request once, when its prefill is done).

    Worked example: 4,500 prompt tokens/s over 3 pods with rates, TTFT histogram of 2 pods
    counting 2 requests/s: 1,500 / 1 = 1,500 tokens.
    """
    p, ttft = reading.prompt_tokens_per_second, reading.ttft
    if p is None or ttft is None or ttft.count_per_second <= 0:
        return None
    return (p / reading.served) / (ttft.count_per_second / reading.ttft_pods)


def attainment(hist: LatencyHistogram | None, bound: float, min_requests_per_second: float) -> float | None:
    """The share of the histogram's requests within `bound`; None when there is no histogram or
    it counts fewer than `min_requests_per_second` (too few to trust a share).

    Worked example: bounds (1, 2.5, +Inf), rates (6, 9, 10): within 2 s, 0.8; with a minimum
    of 20 requests/s: None.
    """
    if hist is None or hist.count_per_second < max(min_requests_per_second, 1e-12):
        return None
    return hist.fraction_within(bound)


def utilisation(load: tuple[float, float], capacity: tuple[float, float]) -> float:
    """u = p / Cp + g / Cg: the share of one replica's SLO capacity its load uses.

    Worked example: 6,000 prompt and 1,500 generated tokens/s on (15,000, 3,000): 0.4 + 0.5 = 0.9.
    """
    return load[0] / capacity[0] + load[1] / capacity[1]


def learn_capacity(
    capacity: tuple[float, float],
    load: tuple[float, float],
    ttft_met: bool | None,
    tpot_met: bool | None,
    slack: bool,
    queued: bool,
    max_step_ratio: float,
) -> tuple[tuple[float, float], bool]:
    """One tick of learning: ((Cp, Cg), infeasible at low load). `load` is one replica's (p, g);
    `*_met` whether that latency met the target share (None: unknown); `slack` whether every
    known one met it within half its bound; `queued` whether pods queue.

    Worked example, capacity (15,000, 3,000), step 1.1:
    met at (18,000, 2,400), u = 1.2 + 0.8 = 2.0: grow by min(2.0, 1.1): (16,500, 3,300).
    met at (9,000, 900), u = 0.9, with slack: probe 1.01: (15,150, 3,030); without: no change.
    TTFT broken at (9,000, 900): the prompt share 0.6 over the room decode leaves, 1 - 0.3,
    is 0.857: Cp 12,857, Cg as it is. TPOT broken there: 0.3 / 0.4 = 0.75, bounded to 1 / 1.1:
    Cg 2,727. Both broken: both by max(0.9, 1 / 1.1) = 0.909.
    TTFT broken at (3,000, 300), u = 0.3: infeasible at low load, no change; if pods queue:
    shrink, at most by 1 / 1.1. Broken at u = 2.0: no change (more replicas are coming).
    """
    if ttft_met is None and tpot_met is None:
        return capacity, False
    cp, cg = capacity
    u = utilisation(load, capacity)
    if ttft_met is not False and tpot_met is not False:
        if u > 1.0:
            factor = min(u, max_step_ratio)
        elif slack and u >= LOW_LOAD_UTILISATION:
            factor = min(PROBE_STEP_RATIO, max_step_ratio)
        else:
            return capacity, False
        return (cp * factor, cg * factor), False
    if u >= 1.0:
        return capacity, False
    if u < LOW_LOAD_UTILISATION and not queued:
        return capacity, True
    return _shrink(capacity, load, ttft_met is False, tpot_met is False, 1.0 / max_step_ratio), False


def _shrink(
    capacity: tuple[float, float], load: tuple[float, float], ttft_broken: bool, tpot_broken: bool, floor: float
) -> tuple[float, float]:
    """Shrink toward the load (u = 1 at the observed point), by at most `floor` a tick: both
    when both broke, else only the broken side (Cp for TTFT, Cg for TPOT)."""
    share_p, share_g = load[0] / capacity[0], load[1] / capacity[1]
    if ttft_broken and tpot_broken:
        factor = max(share_p + share_g, floor)
        return capacity[0] * factor, capacity[1] * factor
    if ttft_broken:
        return capacity[0] * max(share_p / (1.0 - share_g), floor), capacity[1]
    return capacity[0], capacity[1] * max(share_g / (1.0 - share_p), floor)


MAX_DRIFT_RATIO = 20.0  # the learned capacity stays within 1/20 .. 20 x the cold start


def within_drift(capacity: tuple[float, float], cold: tuple[float, float]) -> tuple[float, float]:
    """The learned capacity kept within `MAX_DRIFT_RATIO` of the cold start either way.

    Worked example: cold (15,000, 3,000), learned (400,000, 100): (300,000, 150).
    """
    return (
        min(max(capacity[0], cold[0] / MAX_DRIFT_RATIO), cold[0] * MAX_DRIFT_RATIO),
        min(max(capacity[1], cold[1] / MAX_DRIFT_RATIO), cold[1] * MAX_DRIFT_RATIO),
    )


def demand_scale(demand: Demand) -> float:
    """Served token rates to token demand: arrivals / completions when the queue model has an
    arrival estimate, else 1 (the served rates are the demand).

    Worked example: arrivals 5.2, completions 4.0 requests/s: 1.3; no arrival estimate: 1.
    """
    arrivals, completed = demand.arrivals_per_second, demand.completed_per_second
    if arrivals is None or completed is None or completed <= 0.0:
        return 1.0
    return arrivals / completed


def starting_state(state: SloState, cold: tuple[float, float]) -> SloState:
    """The state to learn from: as it is when learned from this cold start, else a new one (a
    changed profile or override starts over).

    Worked example: learned from (15,000, 3,000), cold start now (5,000, 1,800): a new state
    with cold start (5,000, 1,800) and nothing learned.
    """
    return state if state.cold_start == cold else replace(COLD_SLO_STATE, cold_start=cold)


def assess_slo(
    policy: PolicyParams,
    healthy: tuple[ReadyPod, ...],
    served: int,
    all_healthy: bool,
    demand: Demand,
    state: SloState,
    now: float,
) -> SloSignal | None:
    """The SLO signal before the headroom (`add_headroom` follows once the lead time is known);
    None when no healthy pod has any SLO series.

    Worked example: 2 served pods, each 3,000 prompt and 750 generated tokens/s, cold start
    (15,000, 3,000), no histogram, no arrival estimate: one replica uses 0.2 + 0.25 = 0.45;
    replicas 6,000 / 15,000 + 1,500 / 3,000 = 0.9 before the headroom; nothing learned.
    """
    reading = read_slo(healthy, served, now, policy.stale_after_seconds)
    if reading is None:
        return None
    cold = cold_start_capacity(
        policy.capacity_profile, policy.capacity_prompt_tokens_per_second, policy.capacity_generation_tokens_per_second
    )
    state = starting_state(state, cold)
    learned = state.capacity_prompt_tokens_per_second, state.capacity_generation_tokens_per_second
    capacity = (learned[0], learned[1]) if learned[0] is not None and learned[1] is not None else cold
    slo = policy.slo
    bound = ttft_bound(slo, mean_prompt_tokens(reading))
    minimum = policy.capacity_learning_min_requests_per_second
    a_ttft, a_tpot = attainment(reading.ttft, bound, minimum), attainment(reading.tpot, slo.tpot_seconds, minimum)
    p, g = reading.prompt_tokens_per_second, reading.generation_tokens_per_second
    if p is None or g is None:
        return SloSignal(0.0, 0.0, None, None, capacity, learned[0] is not None, bound, a_ttft, a_tpot, None,
                         False, 1.0, True, 0.0, state)
    load = (p / served, g / served)
    infeasible = False
    if all_healthy and not reading.partial:
        verdict = _verdict(reading, bound, slo, a_ttft, a_tpot, minimum)
        new, infeasible = learn_capacity(capacity, load, *verdict, demand.saturated_pods > 0,
                                         policy.capacity_learning_max_step_ratio)
        if new != capacity:
            capacity = within_drift(new, cold)
            state = replace(state, capacity_prompt_tokens_per_second=capacity[0],
                            capacity_generation_tokens_per_second=capacity[1])
    scale = demand_scale(demand)
    base = utilisation((p * scale, g * scale), capacity)
    return SloSignal(base, base, p, g, capacity, state.capacity_prompt_tokens_per_second is not None, bound,
                     a_ttft, a_tpot, utilisation(load, capacity), infeasible, 1.0, reading.partial,
                     demand_units(p * scale, g * scale, cold), state)


def _verdict(
    reading: SloReading, bound: float, slo: SloParams, a_ttft: float | None, a_tpot: float | None, minimum: float
) -> tuple[bool | None, bool | None, bool]:
    """(TTFT met, TPOT met, met with slack): met = attainment >= target (None: unknown); slack =
    every known one meets the target within `SLACK_RATIO` of its bound."""
    target = slo.attainment_target
    ttft_met = None if a_ttft is None else a_ttft >= target
    tpot_met = None if a_tpot is None else a_tpot >= target
    slack = True
    for met, hist, limit in ((ttft_met, reading.ttft, bound), (tpot_met, reading.tpot, slo.tpot_seconds)):
        if met is not None:
            tight = attainment(hist, limit * SLACK_RATIO, minimum)
            slack = slack and tight is not None and tight >= target
    return ttft_met, tpot_met, slack


def add_headroom(signal: SloSignal, policy: PolicyParams, lead_seconds: float, now: float) -> SloSignal:
    """The SLO replicas with the headroom of the lead time (`headroom`), and its readings kept.
    Without token rates: as it is.

    Worked example: base 0.9 replicas, headroom state of 50 samples with mean 0.05 and
    variance 0.01, target 0.99: ratio 1.327, replicas 1.19.
    """
    if signal.prompt_tokens_per_second is None:
        return signal
    state = track_headroom(signal.state, signal.demand_units, now, lead_seconds, policy.headroom_half_life_seconds)
    ratio = headroom_ratio(state, policy.slo.attainment_target, policy.headroom_max_ratio)
    return replace(signal, replicas=signal.base_replicas * ratio, headroom_ratio=ratio, state=state)
