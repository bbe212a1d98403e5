"""The SLO capacity step: replicas from token demand and a capacity learned from vLLM's latency.

**Capacity is a region.** A replica at prompt rate p and generation rate g (tokens/s) uses
u = p / Cp + g / Cg of its SLO capacity: prefill and decode time-share the GPU. (Cp, Cg) starts
from the shipped table (`capacity_table`) and is learned online.

**Reading** (`read_slo`). From the healthy pods (step 1): fleet token rates, the healthy pods
with fresh rates standing in for the served ones (as the demand step does); their usable TTFT
and TPOT histograms, one `HistogramSum` a bucket layout (`by_layout`). The attainments
(`attainment`) are the fleet's shares of requests within the TTFT bound (`ttft_bound`:
length-aware when configured) and within the TPOT bound: the pods' buckets around the bound
summed and interpolated once (as `histogram_quantile` does), over the pods' requests summed.
The interpolation is linear in the rates, so this is each pod interpolated in its own buckets
and added up, to float rounding; pods with other bounds are a sum of their own, not dropped.
When every ready pod has all the SLO series, well formed, they are read once where the
observation is built (`slo_series.sum_slo_series`): that reading is taken as it is when every
ready pod is healthy and its oldest sample fresh; otherwise the pods are read here.

**Learning** (`learn_capacity`): the estimate moves only when prediction and observation
disagree, by at most `capacity_learning_max_step_ratio` per tick, and only from a histogram
with enough requests and a fleet whose data is whole:

* SLO met while u > 1: the replica carries more than we thought: grow both to the load at once
  when no pod queues (the load was carried within the SLO: evidence, not a guess; a cold start
  that is too low otherwise orders replicas for minutes before it is corrected), by the step
  when pods queue (the window may not count the queued requests yet).
* SLO met with slack (latency at the target quantile within half the bound) at u >= 0.5,
  with the fleet at the size this estimate asks for (u x the headroom >= 0.9: the estimate is
  being tested): probe up by `PROBE_STEP_RATIO` a tick. Without this, an estimate that is too
  low would never be corrected: the fleet is sized to keep u < 1, so "met at u > 1" would
  never be seen. While the fleet is larger than the estimate asks (a scale-down the windows
  still hold), the probe waits: after a probe u x headroom is at least 0.9 / the step, so the
  estimate runs at most 1 / 0.9 x the step ahead of a load the fleet carried with slack.
  **Slow start** (`probe_ratio`, `slow_start`): from a new state, each probe doubles the
  step's excess (0.2, 0.4, 0.8 ... %, at most `capacity_learning_max_step_ratio`), a wait
  keeps it, and the first breach or tick met without slack ends it for good (`probe_doublings`
  None): the base step from then on. A fleet started far too large (one moved over from a
  static fleet) sheds in tens of minutes instead of hours; the estimate runs at most
  1 / 0.9 x 1.1 = ~22 % ahead of a tested load during the slow start, ~11 % after it.
* SLO broken at 0.5 <= u < 1: shrink toward the load, Cp on a TTFT breach, Cg on a TPOT breach.
* SLO broken at u < 0.5: an SLO infeasible at low load (prompts too long for the bound, say):
  more replicas would not help, so nothing is learned and the decision flags it. Unless pods
  queue: then the replicas are overloaded and the estimate is far too high: shrink.
* SLO broken at 1 <= u <= step: expected; more replicas are coming. No change. Broken at
  u > step: the replicas carry more than a step above the estimate, so it bounds nothing (the
  SLO capacity is below the load, by how much is unknown) and sizing on it would order u times
  the fleet: both move to the load / step (u = step), and the rules above take it from there
  (a breach below u = 1 shrinks it, a load carried within the SLO grows it).

**Replicas** (`slo_replicas`): (P / Cp + G / Cg) x headroom, with token demand = served token
rates x arrivals / completions when the queue model has an arrival estimate (else served), and
the headroom of `headroom` for the lead time.

Absent signals (no pod has any of the SLO series) give no SLO signal: the other signals decide
exactly as before, unless this target had them (`series_gone`): then they are missing, and the
data partial. Present but stale, NaN or missing on some pods: the SLO data is partial and
can never lower the replicas (`partial`), and nothing is learned.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from math import inf
from operator import lt

from autoscaler.policy.capacity_table import cold_start_capacity
from autoscaler.policy.demand import Demand
from autoscaler.policy.headroom import base_ratio, demand_units, headroom_ratio, track_headroom
from autoscaler.policy.params import PolicyParams, SloParams
from autoscaler.policy.slo_series import histogram_sum, rates_ok
from autoscaler.policy.types import (
    MAX_PROBE_DOUBLINGS,
    HistogramSum,
    LatencyHistogram,
    ReadyPod,
    SloReading,
    SloSeries,
    SloState,
    fast_init,
)

LOW_LOAD_UTILISATION = 0.5  # broken below this: infeasible at low load, not a capacity estimate
SLACK_RATIO = 0.5  # met with slack: the target quantile's latency within this share of the bound
PROBE_STEP_RATIO = 1.002  # per tick, while met with slack
PROBE_SIZED_RATIO = 0.9  # ... and the fleet at >= this share of what the estimate asks (u x headroom)


@fast_init
@dataclass(frozen=True)
class SloSignal:
    """The SLO step's outcome before the headroom, for sizing, the decision values and the
    next state: the one record the step builds (the headroom, which needs the lead time this
    sizes, is applied by `sizing` with `add_headroom`)."""

    base_replicas: float  # without headroom; 0 when the token rates are unknown
    prompt_tokens_per_second: float | None  # served, fleet
    generation_tokens_per_second: float | None
    capacity: tuple[float, float]  # (Cp, Cg) of one replica, after this tick's learning
    capacity_learned: bool
    ttft_bound_seconds: float
    ttft_attainment: float | None
    tpot_attainment: float | None
    utilisation: float | None
    infeasible_at_low_load: bool
    partial: bool
    demand_units: float  # token demand in cold-start replicas (the headroom's reading)
    state: SloState  # after this tick's learning, before the headroom's reading
    slack: bool = False  # met with slack at this load (`with_slack`): the headroom's cold floor waits


def usable_histograms(
    hists: list[LatencyHistogram], now: float, stale: float
) -> tuple[tuple[LatencyHistogram, ...], float, bool]:
    """(the histograms whose `health` is FRESH, the requests/s they count, whether some was
    not), checked the fast way: lengths equal, fresh, the last bound +Inf, the rates `rates_ok`
    (from >= 0 to finite, never decreasing: the check `sum_slo_series` makes), bounds strictly
    ascending (checked once for bounds seen before).

    Worked example, now 1000, stale after 60: rates (1, 3, 4) at 990 and (2, 2, 2) at 995, both
    with bounds (1, 2, +Inf): both usable, 6 requests/s. Rates (3, 2, 4): not; stamped 900:
    not; with a NaN rate: not.
    """
    good: list[LatencyHistogram] = []
    count = 0.0
    ascending: tuple[float, ...] | None = None
    for h in hists:
        bounds, rates = h.upper_bounds, h.cumulative_per_second
        if (
            len(rates) == len(bounds) > 0 and now - h.timestamp <= stale and bounds[-1] == inf
            and rates_ok(rates)
            and (bounds is ascending or bounds == ascending or all(map(lt, bounds, bounds[1:])))
        ):
            good.append(h)
            count += rates[-1]
            ascending = bounds
    return tuple(good), count, len(good) < len(hists)


def read_slo(
    healthy: tuple[ReadyPod, ...], served: int, now: float, stale: float, series: SloSeries | None = None
) -> SloReading | None:
    """The SLO series of the healthy pods; None when none of them has any. `series`: those
    pods' series read where the observation was built (`slo_series`), given only when every
    ready pod is healthy (so all are served): its reading is taken as it is when its oldest
    sample is fresh (the same reading as the pods give, to the last bit), else the pods are read.

    Partial (`SloReading.partial`): a histogram that is not usable, a healthy pod without fresh
    token rates, or a histogram some pods with SLO series have and another lacks (its adapter
    dropped it: that pod's breach must not vanish from the fleet's attainment).

    Worked example: 2 healthy pods of 3 served, with fresh prompt rates 1,000 and 2,000 and
    generation rates 300 and 500 tokens/s: 3,000 x 3 / 2 = 4,500 prompt and 1,200 generated
    tokens/s; no histogram: none usable, not partial. With a TTFT histogram on the first pod
    only: partial.
    """
    if series is not None and now - series.oldest <= stale:
        return series.reading
    prompt = generation = 0.0
    rated = 0
    ttfts: list[LatencyHistogram] = []
    tpots: list[LatencyHistogram] = []
    present = 0
    for pod in healthy:  # one pass, the rates' health inline (`MetricSample.health` is FRESH)
        p, g, ttft, tpot = pod.prompt_tokens_per_second, pod.generation_tokens_per_second, pod.ttft, pod.tpot
        if p is None and g is None and ttft is None and tpot is None:
            continue
        present += 1
        if (p is not None and g is not None and 0.0 <= p.value < math.inf and 0.0 <= g.value < math.inf
                and now - p.timestamp <= stale and now - g.timestamp <= stale):
            prompt += p.value
            generation += g.value
            rated += 1
        if ttft is not None:
            ttfts.append(ttft)
        if tpot is not None:
            tpots.append(tpot)
    if not present:
        return None
    ttft_ok, ttft_count, ttft_bad = usable_histograms(ttfts, now, stale)
    tpot_ok, tpot_count, tpot_bad = usable_histograms(tpots, now, stale)
    scale = served / rated if rated else 0.0
    lacking = 0 < len(ttfts) < present or 0 < len(tpots) < present
    return SloReading(
        prompt * scale if rated else None, generation * scale if rated else None, by_layout(ttft_ok),
        by_layout(tpot_ok), ttft_count, tpot_count, served, ttft_bad or tpot_bad or rated < len(healthy) or lacking,
        len(ttft_ok),
    )


def by_layout(hists: tuple[LatencyHistogram, ...]) -> tuple[HistogramSum, ...]:
    """The histograms as one `HistogramSum` a bucket layout, in the order the layouts first come
    (pods of one layout: the very sum `sum_slo_series` makes, to the last bit).

    Worked example: (1, 3, 4) and (2, 2, 2) on (1, 2, +Inf): one sum of 2 rows counting 6; with
    (1, 4, +Inf) as the second's bounds: two sums of one row each.
    """
    layouts: dict[tuple[float, ...], list[tuple[float, ...]]] = {}
    for h in hists:
        layouts.setdefault(h.upper_bounds, []).append(h.cumulative_per_second)
    return tuple(histogram_sum(bounds, rows) for bounds, rows in layouts.items())


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

    Worked example: 4,500 prompt tokens/s over 3 served pods; TTFT histograms of 2 pods
    counting 1.5 and 0.5 requests/s: 1,500 / 1 = 1,500 tokens.
    """
    p, count = reading.prompt_tokens_per_second, reading.ttft_count
    if p is None or count <= 0:
        return None
    return (p / reading.served) / (count / reading.ttft_pods)


def attainment(
    hists: tuple[HistogramSum, ...], count: float, bound: float, min_requests_per_second: float
) -> float | None:
    """The fleet's share of requests within `bound`: the pods' requests within it (each
    layout's summed buckets interpolated once, `HistogramSum.within`) over their requests
    (`count`, requests/s); None without a histogram or with fewer than
    `min_requests_per_second` requests (too few to trust a share).

    Worked example: rates (6, 9, 10) on bounds (1, 2.5, +Inf) and (1, 2, 4) on bounds
    (1, 4, +Inf): within 2 s, 8 + (1 + 1 x 1 / 3) = 9.33 of 14: 0.667; with a minimum of 20
    requests/s: None.
    """
    if not hists or count < min_requests_per_second or count < 1e-12:
        return None
    if len(hists) == 1:
        return hists[0].within(bound) / count
    return sum([h.within(bound) for h in hists]) / count


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
    sized: float,
    probe: float = PROBE_STEP_RATIO,
) -> tuple[tuple[float, float], bool, bool | None]:
    """One tick of learning: ((Cp, Cg), infeasible at low load, probed). `load` is one replica's
    (p, g); `*_met` whether that latency met the target share (None: unknown); `slack` whether
    every known one met it within half its bound; `queued` whether pods queue; `sized` = u x the
    headroom, the fleet's size against what this estimate asks for (1: as asked); `probe` this
    tick's probe step (`probe_ratio`). probed: True when the probe grew the estimate, False on a
    breach or when met without slack at 0.5 <= u <= 1 (the probe's slow start ends), else None.

    Worked example, capacity (15,000, 3,000), step 1.1:
    met at (18,000, 2,400), u = 1.2 + 0.8 = 2.0, no queue: the replica carried that load within
    the SLO, so grow by u at once: (30,000, 6,000); if pods queue: by min(2.0, 1.1): (16,500, 3,300).
    met at (9,000, 900), u = 0.9, with slack, sized 0.9 x 1.2 = 1.08: probe 1.002: (15,030,
    3,006), probed; by 1.016 (a slow start's fourth probe): (15,240, 3,048). Without slack: no
    change, False; sized 0.85 (a scale-down pending): no change, None.
    TTFT broken at (9,000, 900): the prompt share 0.6 over the room decode leaves, 1 - 0.3,
    is 0.857, bounded to 1 / 1.1 = 0.909: Cp 13,636, Cg as it is (with step 1.2: 12,857).
    TPOT broken there: 0.3 / 0.4 = 0.75, bounded: Cg 2,727. Both broken: both by
    max(0.9, 0.909) = 0.909.
    TTFT broken at (3,000, 300), u = 0.3: infeasible at low load, no change; if pods queue:
    shrink, at most by 1 / 1.1. Broken at u = 1.05: no change (more replicas are coming).
    Broken at (18,000, 2,400), u = 2.0 > 1.1: the replica carries twice the estimate, so the
    estimate is no bound to size on (it would order twice the fleet): both to the load / 1.1,
    (27,273, 5,455), u = 1.1; with step 1: no change. Every breach: False.
    """
    if ttft_met is None and tpot_met is None:
        return capacity, False, None
    cp, cg = capacity
    u = utilisation(load, capacity)
    if ttft_met is not False and tpot_met is not False:
        if u > 1.0:
            # carried within the SLO with no queue: the capacity is at least this load, at once
            # (a queue may hold requests the window has not counted yet: then by the step)
            factor = u if not queued and max_step_ratio > 1.0 else min(u, max_step_ratio)
            return (cp * factor, cg * factor), False, None
        if u < LOW_LOAD_UTILISATION:  # slack is not judged here
            return capacity, False, None
        if not slack:
            return capacity, False, False
        factor = min(probe, max_step_ratio) if sized >= PROBE_SIZED_RATIO else 1.0
        return (cp * factor, cg * factor), False, True if factor > 1.0 else None
    if u >= 1.0:
        if u > max_step_ratio > 1.0:  # broken far above the estimate: not one to size on
            return (cp * u / max_step_ratio, cg * u / max_step_ratio), False, False
        return capacity, False, False
    if u < LOW_LOAD_UTILISATION and not queued:
        return capacity, True, False
    return _shrink(capacity, load, ttft_met is False, tpot_met is False, 1.0 / max_step_ratio), False, False


def probe_ratio(doublings: int | None, max_step_ratio: float) -> float:
    """The probe's step: `PROBE_STEP_RATIO` with its excess doubled for each probe of the slow
    start so far (`SloState.probe_doublings`; None: the slow start has ended, the base step),
    at most `max_step_ratio`.

    Worked example, step 1.1: no probe yet: 1.002; 3 so far: 1.016; 6: 1.128, so 1.1; ended: 1.002.
    """
    return min(1.0 + (PROBE_STEP_RATIO - 1.0) * 2.0 ** (doublings or 0), max_step_ratio)


def slow_start(doublings: int | None, probed: bool | None) -> int | None:
    """The probe's slow start after a tick of `learn_capacity`: one more probe counted (at most
    `MAX_PROBE_DOUBLINGS`), ended for good on a breach or a tick without slack (probed False),
    as it was otherwise (a tick waiting for the fleet to be sized as asked, say).

    Worked example: 3 so far and a probe: 4; and a breach: ended (None); and a tick waiting: 3.
    Ended and a probe: ended.
    """
    if doublings is None or probed is False:
        return None
    return min(doublings + 1, MAX_PROBE_DOUBLINGS) if probed else doublings


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
MAX_SHAPE_RATIO = 2.0  # and its Cp / Cg within 1/2 .. 2 x the cold start's


def within_drift(capacity: tuple[float, float], cold: tuple[float, float]) -> tuple[float, float]:
    """The learned capacity kept within `MAX_DRIFT_RATIO` of the cold start either way, and its
    shape Cp / Cg within `MAX_SHAPE_RATIO` of the cold start's, by lowering the side that ran
    away (the conservative way). Prefill and decode cost are tied by the model and the GPU the
    row names; a side the traffic never tests (a decode-bound fleet never breaks TTFT) would
    otherwise grow with every probe while the other shrinks.

    Worked example: cold (15,000, 3,000), shape 5. Learned (400,000, 100): (300,000, 150) by
    the drift bounds, shape 2,000 > 10: Cp lowered to 150 x 10 = 1,500. Learned (16,500, 3,300):
    as it is. Learned (60,000, 3,000), shape 20: Cp 30,000. Learned (15,000, 9,000), shape
    1.67 < 2.5: Cg 15,000 / 2.5 = 6,000.
    """
    cp = min(max(capacity[0], cold[0] / MAX_DRIFT_RATIO), cold[0] * MAX_DRIFT_RATIO)
    cg = min(max(capacity[1], cold[1] / MAX_DRIFT_RATIO), cold[1] * MAX_DRIFT_RATIO)
    shape = cold[0] / cold[1]
    cp = min(cp, cg * shape * MAX_SHAPE_RATIO)
    cg = min(cg, cp / (shape / MAX_SHAPE_RATIO))
    return cp, cg


def demand_scale(demand: Demand, max_ratio: float) -> float:
    """Served token rates to token demand: arrivals / completions over the arrival estimate's
    own window (its mean throughput; the current throughput when the window's is unknown), 1
    when there is no arrival estimate; at most `max_ratio` (`forecast_max_growth_ratio`): the
    arrival estimate is a derivative of the load and jumps when pods come and go, and a jump
    must not multiply the token demand.

    Why the window's completions: arrivals are the window's mean throughput plus the load's
    growth over it. Set against the throughput of this tick instead, a burst reads as a fall:
    the fleet finished 130 requests/s this tick but 39/s on average over the window whose
    arrivals were 52/s, so 52 / 130 = 0.4 would scale the token demand down 2.5x while the
    load grows (simulator, Azure code trace), where 52 / 39 = 1.33 scales it up.

    Worked example (max 1.5): arrivals 5.2, window completions 4.0 requests/s: 1.3; arrivals
    52, window 39, this tick 130: 1.33; no arrival estimate: 1; arrivals 17.5 over
    completions 1.2 (a load jump): 1.5.
    """
    arrivals = demand.arrivals_per_second
    completed = demand.window_completed_per_second
    if completed is None:
        completed = demand.completed_per_second
    if arrivals is None or completed is None or completed <= 0.0:
        return 1.0
    return min(arrivals / completed, max_ratio)


def starting_state(state: SloState, cold: tuple[float, float]) -> SloState:
    """The state to learn from: as it is when learned from this cold start, else a new one (a
    changed profile or override starts over).

    Worked example: learned from (15,000, 3,000), cold start now (5,000, 1,800): a new state
    with cold start (5,000, 1,800) and nothing learned.
    """
    return state if state.cold_start == cold else SloState(cold_start=cold)


def series_gone(policy: PolicyParams, state: SloState) -> SloSignal:
    """No healthy pod has any SLO series, but this target's had them (its state holds a cold
    start): the series are missing (a relabel rule or a recording rule dropped them, a scrape
    job lost), not absent by nature. Partial, as when some pods lack them: the other signals
    may raise the replicas, never lower them (`hold_on_partial_data`), nothing is learned. A
    target whose series never came (a vLLM without them) gets None: the other signals decide.

    Worked example: a state learned from (15,000, 3,000) and no series this tick: partial, no
    replicas asked for (0), the capacity kept.
    """
    capacity = current_capacity(state, state.cold_start or (0.0, 0.0))
    return SloSignal(0.0, None, None, capacity, state.capacity_prompt_tokens_per_second is not None,
                     ttft_bound(policy.slo, None), None, None, None, False, True, 0.0, state)


def assess_slo(
    policy: PolicyParams,
    healthy: tuple[ReadyPod, ...],
    served: int,
    all_healthy: bool,
    demand: Demand,
    state: SloState,
    now: float,
    series: SloSeries | None = None,
) -> SloSignal | None:
    """The SLO signal before the headroom (`add_headroom` follows once the lead time is known);
    None when no healthy pod has any SLO series. Learns only when every ready pod is healthy
    and the SLO series are whole.

    Worked example: 2 served pods, each 3,000 prompt and 750 generated tokens/s, cold start
    (15,000, 3,000), no histogram, no arrival estimate: one replica uses 0.2 + 0.25 = 0.45;
    replicas 6,000 / 15,000 + 1,500 / 3,000 = 0.9 before the headroom; nothing learned.
    """
    reading = read_slo(healthy, served, now, policy.stale_after_seconds, series)
    if reading is None:
        return None if state.cold_start is None else series_gone(policy, state)
    cold = cold_start_capacity(
        policy.capacity_profile, policy.capacity_prompt_tokens_per_second, policy.capacity_generation_tokens_per_second
    )
    state = starting_state(state, cold)
    capacity = current_capacity(state, cold)
    slo, minimum = policy.slo, policy.capacity_learning_min_requests_per_second
    bound = ttft_bound(slo, mean_prompt_tokens(reading) if slo.ttft_seconds_per_1k_prompt_tokens else None)
    a_ttft = attainment(reading.ttft, reading.ttft_count, bound, minimum)
    a_tpot = attainment(reading.tpot, reading.tpot_count, slo.tpot_seconds, minimum)
    p, g = reading.prompt_tokens_per_second, reading.generation_tokens_per_second
    if p is None or g is None:
        return SloSignal(0.0, None, None, capacity, state.capacity_prompt_tokens_per_second is not None,
                         bound, a_ttft, a_tpot, None, False, True, 0.0, state)
    load = (p / served, g / served)
    infeasible = slack = False
    if all_healthy and not reading.partial:
        u = utilisation(load, capacity)
        slack = with_slack(reading, bound, slo, (a_ttft, a_tpot), minimum)
        verdict = judge((a_ttft, a_tpot), slo.attainment_target, u, slack)
        sized = u * headroom_ratio(state, slo.attainment_target, policy.headroom_max_ratio, not slack)
        step, doublings = policy.capacity_learning_max_step_ratio, state.probe_doublings
        new, infeasible, probed = learn_capacity(capacity, load, *verdict, demand.saturated_pods > 0, step, sized,
                                                 probe_ratio(doublings, step))
        if new != capacity:
            capacity = within_drift(new, cold)
            state = state.learned(capacity)
        if (after := slow_start(doublings, probed)) != doublings:
            state = state.probing(after)
    scale = demand_scale(demand, policy.forecast_max_growth_ratio)
    base = utilisation((p * scale, g * scale), capacity)
    return SloSignal(base, p, g, capacity, state.capacity_prompt_tokens_per_second is not None, bound,
                     a_ttft, a_tpot, utilisation(load, capacity), infeasible, reading.partial,
                     demand_units(p * scale, g * scale, cold), state, slack)


def current_capacity(state: SloState, cold: tuple[float, float]) -> tuple[float, float]:
    """The learned (Cp, Cg), or the cold start while nothing is learned."""
    cp, cg = state.capacity_prompt_tokens_per_second, state.capacity_generation_tokens_per_second
    return (cp, cg) if cp is not None and cg is not None else cold


def judge(
    attained: tuple[float | None, float | None], target: float, u: float, slack: bool
) -> tuple[bool | None, bool | None, bool]:
    """(TTFT met, TPOT met, met with slack where learning looks at it): met = attainment >=
    target (None: unknown); the slack (`with_slack`) counts only at 0.5 <= u <= 1.

    Worked example: target 0.99, attainments 0.995 and None, u 0.8, no slack: (True, None,
    False); with slack: (True, None, True); with slack at u 0.3: (True, None, False);
    attainment 0.9: (False, None, False).
    """
    ttft_met = None if attained[0] is None else attained[0] >= target
    tpot_met = None if attained[1] is None else attained[1] >= target
    return ttft_met, tpot_met, slack and LOW_LOAD_UTILISATION <= u <= 1.0


def with_slack(
    reading: SloReading, bound: float, slo: SloParams, attained: tuple[float | None, float | None], minimum: float
) -> bool:
    """Met with slack, at any load: at least one latency known, and every known one meets the
    target within `SLACK_RATIO` of its bound (so none is broken).

    Worked example: target 0.99, TTFT bound 2 s, attainment 0.995, within 1 s 0.97: False;
    0.999 and 0.995 within 1 s: True; and TPOT broken (0.9): False; nothing known: False.
    """
    target = slo.attainment_target
    known = False
    for a, hists, count, limit in ((attained[0], reading.ttft, reading.ttft_count, bound),
                                   (attained[1], reading.tpot, reading.tpot_count, slo.tpot_seconds)):
        if a is None:
            continue
        if a < target:
            return False
        tight = attainment(hists, count, limit * SLACK_RATIO, minimum)
        if tight is None or tight < target:
            return False
        known = True
    return known


def add_headroom(signal: SloSignal, policy: PolicyParams, lead_seconds: float, now: float) -> tuple[float, SloState]:
    """(the headroom ratio for the lead time (`headroom`), the state with its reading kept):
    the SLO replicas are `base_replicas` x the ratio. Without token rates: (1, the state). The
    ratio is the growth quantile times the base over the demand now (`headroom.base_ratio`:
    a demand below its lead time's level is sized from the level), at most
    `headroom_max_ratio`. The cold-start floor waits while the latency has slack
    (`SloSignal.slack`): such a fleet carries headroom of its own, which a floor on an estimate
    the jump set to the load would double.

    Worked example: base 0.9 replicas, headroom state of 50 samples with mean 0.05 and
    variance 0.01, target 0.99, demand at its level: ratio 1.327, replicas 1.19; the demand
    now at 0.9 of its level: 1.327 / 0.9 = 1.474.
    """
    if signal.prompt_tokens_per_second is None:
        return 1.0, signal.state
    state = track_headroom(signal.state, signal.demand_units, now, lead_seconds, policy.headroom_half_life_seconds)
    growth = headroom_ratio(state, policy.slo.attainment_target, policy.headroom_max_ratio, not signal.slack)
    above = base_ratio(state.demand_history, now, signal.demand_units, lead_seconds)
    return min(policy.headroom_max_ratio, growth * above), state
