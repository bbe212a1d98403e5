"""Table tests of the SLO steps (capacity table, SLO capacity, headroom) and of `SloState`'s
persistence. Each docstring's worked example is a row here, with an explicit `now`."""

from __future__ import annotations

import math
from dataclasses import replace

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from pydantic import ValidationError

from autoscaler.policy import Observation, PolicyParams, PolicyState, decide
from autoscaler.policy.capacity_table import (
    CAPACITY_TABLE,
    GENERIC,
    cold_start_capacity,
)
from autoscaler.policy.demand import Demand
from autoscaler.policy.forecast import Forecast
from autoscaler.policy.headroom import (
    COLD_START_SD,
    READINGS_PER_LEAD_TIME,
    demand_units,
    headroom_ratio,
    recent_mean,
    base_ratio,
    reference_base,
    reference_index,
    normal_quantile,
    track_headroom,
    update_moments,
)
from autoscaler.policy.lead_time import LeadTimeEstimate
from autoscaler.policy.outcome import bound_signal
from autoscaler.policy.recommendation import Recommendation, hold_while_slo_broken, recommend, slo_broken
from autoscaler.policy.params import SloParams
from autoscaler.policy.sizing import Sizing, headroom_horizon
from autoscaler.policy.slo_capacity import (
    MAX_DRIFT_RATIO,
    SloReading,
    SloSignal,
    add_headroom,
    assess_slo,
    attainment,
    demand_scale,
    judge,
    with_slack,
    learn_capacity,
    mean_prompt_tokens,
    probe_ratio,
    read_slo,
    slow_start,
    starting_state,
    ttft_bound,
    usable_histograms,
    by_layout,
    utilisation,
    within_drift,
)
from autoscaler.policy.types import MAX_PROBE_DOUBLINGS, Reason, SloState

from .builders import hist, slo_pod

INF = math.inf
NOW = 1000.0
H100 = (15_000.0, 3_000.0)


def demand(arrivals: float | None = None, completed: float | None = None, saturated: int = 0,
           window: float | None = None) -> Demand:
    return Demand(0.0, 8.0, 1.0, saturated, completed, arrivals, None, "none", 0.0, 1.25,
                  window_completed_per_second=window)


# --- capacity table --------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("profile", "prompt", "generation", "expected"),
    [
        ("llama-3-8b/h100", None, None, (15_000.0, 3_000.0)),  # docstring
        ("llama-3-8b/h100", None, 4_500.0, (15_000.0, 4_500.0)),  # docstring: generation override
        (None, None, None, (4_000.0, 1_500.0)),  # docstring: the generic row
        ("no-such/gpu", None, None, (4_000.0, 1_500.0)),  # unknown: generic (config rejects it)
        (None, 9_000.0, 900.0, (9_000.0, 900.0)),
    ],
)
def test_cold_start_capacity(profile, prompt, generation, expected) -> None:
    assert cold_start_capacity(profile, prompt, generation) == expected


def test_every_row_cites_its_source_and_errs_low() -> None:
    assert GENERIC in CAPACITY_TABLE
    for name, row in CAPACITY_TABLE.items():
        assert len(row.source) > 20, name
        # conservative: at most ~half the 5-6.5k saturated output tok/s measured on an H100
        assert 0 < row.generation_tokens_per_second <= 3_000.0 and 0 < row.prompt_tokens_per_second <= 15_000.0


def test_unknown_profile_is_a_config_error() -> None:
    with pytest.raises(ValidationError, match="capacity_profile"):
        PolicyParams(capacity_profile="gpt-9/tpu")
    assert PolicyParams(capacity_profile="qwen3-8b/h100").capacity_profile == "qwen3-8b/h100"


# --- reading -----------------------------------------------------------------------------------
def test_usable_histograms() -> None:
    # docstring: now 1000, stale after 60
    a = hist((1.0, 2.0, INF), (1.0, 3.0, 4.0), 990.0)
    b = hist((1.0, 2.0, INF), (2.0, 2.0, 2.0), 995.0)
    assert usable_histograms([a, b], NOW, 60.0) == ((a, b), 6.0, False)
    for bad in (
        hist((1.0, 2.0, INF), (3.0, 2.0, 4.0), 990.0),  # decreasing
        hist((1.0, 2.0, INF), (1.0, 3.0, 4.0), 900.0),  # stale
        hist((1.0, 2.0, INF), (1.0, math.nan, 4.0), 990.0),  # NaN
        hist((1.0, 2.0, INF), (1.0, INF, INF), 990.0),  # not finite
        hist((1.0, 2.0, INF), (-1.0, 3.0, 4.0), 990.0),  # negative
        hist((2.0, 1.0, INF), (1.0, 3.0, 4.0), 990.0),  # bounds not ascending
        hist((1.0, 2.0), (1.0, 3.0), 990.0),  # no +Inf bucket
        hist((1.0, 2.0, INF), (1.0, 3.0), 990.0),  # lengths differ
        hist((), (), 990.0),
    ):
        assert usable_histograms([a, bad], NOW, 60.0) == ((a,), 4.0, True), bad


def test_read_slo() -> None:
    # docstring: 2 healthy pods of 3 served: 3,000 x 3 / 2 = 4,500 prompt, 1,200 generated
    pods = (slo_pod("a", NOW, 1_000.0, 300.0), slo_pod("b", NOW, 2_000.0, 500.0))
    r = read_slo(pods, 3, NOW, 60.0)
    assert r is not None
    assert (r.prompt_tokens_per_second, r.generation_tokens_per_second) == pytest.approx((4_500.0, 1_200.0))
    assert (r.ttft, r.tpot, r.partial) == ((), (), False)
    # no SLO series at all: no reading (the other signals decide as before)
    assert read_slo((slo_pod("a", NOW, None, None),), 1, NOW, 60.0) is None
    # a stale token rate on one pod: the other stands in, partial
    stale = slo_pod("b", NOW - 61, 2_000.0, 500.0)
    r = read_slo((pods[0], stale), 2, NOW, 60.0)
    assert r is not None and r.partial and r.prompt_tokens_per_second == pytest.approx(2_000.0)
    # a NaN histogram: partial
    nan = slo_pod("c", NOW, 1_000.0, 300.0, ttft=hist((1.0, INF), (math.nan, 1.0), NOW))
    r = read_slo((pods[0], nan), 2, NOW, 60.0)
    assert r is not None and r.partial and r.ttft == ()
    # only bad token rates: known to be present, rates unknown
    r = read_slo((slo_pod("d", NOW, math.nan, 300.0),), 1, NOW, 60.0)
    assert r is not None and r.partial and r.prompt_tokens_per_second is None
    # docstring: a TTFT histogram on the first pod only (the adapter dropped the second's, whose
    # buckets were no histogram): partial, so its breach cannot vanish into the first's attainment
    good = slo_pod("a", NOW, 1_000.0, 300.0, ttft=hist((1.0, INF), (2.0, 2.0), NOW))
    r = read_slo((good, pods[1]), 2, NOW, 60.0)
    assert r is not None and r.partial and r.ttft_pods == 1
    # ... and on both: whole
    r = read_slo((good, slo_pod("b", NOW, 2_000.0, 500.0, ttft=hist((1.0, INF), (0.0, 2.0), NOW))), 2, NOW, 60.0)
    assert r is not None and not r.partial and r.ttft_pods == 2


@pytest.mark.parametrize(
    ("per_1k", "mean_prompt", "expected"),
    [(0.5, 4_000.0, 4.0), (0.5, None, 2.0), (0.0, 4_000.0, 2.0)],  # docstring: 2 + 0.5 x 4; unknown: 2
)
def test_ttft_bound(per_1k: float, mean_prompt: float | None, expected: float) -> None:
    assert ttft_bound(SloParams(ttft_seconds=2.0, ttft_seconds_per_1k_prompt_tokens=per_1k), mean_prompt) == expected


def test_mean_prompt_tokens() -> None:
    # docstring: 4,500 prompt tokens/s over 3 served pods; TTFT histograms of 2 pods counting
    # 1.5 and 0.5 requests/s: 1,500 / 1 = 1,500 tokens
    h1, h2 = hist((1.0, INF), (1.0, 1.5), NOW), hist((1.0, INF), (0.5, 0.5), NOW)
    r = SloReading(4_500.0, 1_200.0, (h1, h2), (), 2.0, 0.0, 3, False, 2)
    assert mean_prompt_tokens(r) == pytest.approx(1_500.0)
    assert mean_prompt_tokens(SloReading(4_500.0, 1_200.0, (), (), 0.0, 0.0, 3, False, 0)) is None


def test_attainment() -> None:
    # docstring: (6, 9, 10) on bounds (1, 2.5, +Inf) and (1, 2, 4) on (1, 4, +Inf); within 2 s:
    # 8 + (1 + 1/3) = 9.33 of 14
    a = hist((1.0, 2.5, INF), (6.0, 9.0, 10.0), NOW)
    b = hist((1.0, 4.0, INF), (1.0, 2.0, 4.0), NOW)
    assert attainment(by_layout((a, b)), 14.0, 2.0, 1.0) == pytest.approx((8 + 1 + 1 / 3) / 14)
    assert attainment(by_layout((a, b)), 14.0, 2.0, 20.0) is None  # too few requests to trust a share
    assert attainment((), 0.0, 2.0, 0.0) is None
    assert attainment(by_layout((a,)), 10.0, 2.0, 1.0) == pytest.approx(0.8)  # LatencyHistogram's own example


def test_by_layout() -> None:
    # docstring: one sum of 2 rows counting 6; another layout on the second: two sums
    shared = (1.0, 2.0, INF)
    a, b = hist(shared, (1.0, 3.0, 4.0), NOW), hist(shared, (2.0, 2.0, 2.0), NOW)
    (one,) = by_layout((a, b))
    assert (one.upper_bounds, one.rows, one.count_per_second) == (shared, ((1.0, 3.0, 4.0), (2.0, 2.0, 2.0)), 6.0)
    other = hist((1.0, 4.0, INF), (2.0, 2.0, 2.0), NOW)
    assert [h.rows for h in by_layout((a, other))] == [((1.0, 3.0, 4.0),), ((2.0, 2.0, 2.0),)]
    # equal bounds in another tuple are one layout
    assert len(by_layout((a, hist(tuple(list(shared)), (2.0, 2.0, 2.0), NOW)))) == 1


def test_histogram_sum_is_the_summed_histogram() -> None:
    # HistogramSum's docstring: (6, 9, 10) and (1, 2, 4) on (1, 2.5, +Inf): 9.67 within 2 s
    # (and `within`'s: 8 within 2 s, 9 within 3 s, 3 within 0.5 s of (6, 9, 10) alone)
    one = hist((1.0, 2.5, INF), (6.0, 9.0, 10.0), NOW)
    assert (one.within(2.0), one.within(3.0), one.within(0.5)) == (8.0, 9.0, 3.0)
    shared = (1.0, 2.5, INF)
    (s,) = by_layout((hist(shared, (6.0, 9.0, 10.0), NOW), hist(shared, (1.0, 2.0, 4.0), NOW)))
    assert s.within(2.0) == pytest.approx(7.0 + 4.0 / 1.5)
    # `within` of the summed rows is `LatencyHistogram.within` of the summed histogram, and the
    # pods' own `within` added up to float rounding: inside a bucket, on a bound, below the
    # first, in the +Inf bucket and beyond
    rates = [(0.1, 0.7, 0.7, 1.3, 2.9), (0.0, 0.3, 1.1, 1.9, 2.0), (0.7, 0.71, 0.9, 2.2, 5.0)]
    layout = (0.003, 0.17, 0.5, 7.3, INF)
    hists = tuple(hist(layout, r, NOW) for r in rates)
    (summed,) = by_layout(hists)
    whole = hist(layout, tuple(map(sum, zip(*rates))), NOW)
    for threshold in (0.0, 0.001, 0.003, 0.1, 0.17, 0.3333, 2.0, 7.3, 9.0):
        assert summed.within(threshold) == whole.within(threshold), threshold
        assert summed.within(threshold) == pytest.approx(sum(h.within(threshold) for h in hists), rel=1e-12)


def test_utilisation() -> None:
    assert utilisation((6_000.0, 1_500.0), H100) == pytest.approx(0.9)  # docstring: 0.4 + 0.5


# --- learning ------------------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("load", "ttft_met", "tpot_met", "slack", "queued", "expected", "infeasible", "sized", "probed"),
    [
        # docstring rows, capacity (15,000, 3,000), step 1.1
        ((18_000.0, 2_400.0), True, True, False, False, (30_000.0, 6_000.0), False, 1.08, None),  # met, u 2: the load
        ((18_000.0, 2_400.0), True, True, False, True, (16_500.0, 3_300.0), False, 1.08, None),  # ...queued: x1.1
        ((9_000.0, 900.0), True, True, True, False, (15_030.0, 3_006.0), False, 1.08, True),  # met with slack: probe
        ((9_000.0, 900.0), True, True, False, False, H100, False, 1.08, False),  # met, no slack, u < 1: as it is
        ((9_000.0, 900.0), True, True, True, False, H100, False, 0.85, None),  # slack, but a scale-down pending
        ((9_000.0, 900.0), False, True, False, False, (15_000.0 / 1.1, 3_000.0), False, 1.08, False),  # TTFT: Cp
        ((9_000.0, 900.0), True, False, False, False, (15_000.0, 3_000.0 / 1.1), False, 1.08, False),  # TPOT: 1/1.1
        ((9_000.0, 900.0), False, False, False, False, (15_000.0 / 1.1, 3_000.0 / 1.1), False, 1.08, False),  # both
        ((3_000.0, 300.0), False, True, False, False, H100, True, 1.08, False),  # u 0.3: infeasible at low load
        ((3_000.0, 300.0), False, True, False, True, (15_000.0 / 1.1, 3_000.0), False, 1.08, False),  # ...queued
        ((18_000.0, 2_400.0), False, True, False, False, (15_000.0 * 2 / 1.1, 3_000.0 * 2 / 1.1), False, 1.08,
         False),  # broken at u 2 > 1.1: to the load / 1.1 (27,273, 5,455)
        ((12_600.0, 600.0), False, True, False, False, H100, False, 1.08, False),  # broken at u 1.04: more are coming
        # more rows
        ((18_000.0, 2_400.0), None, None, False, False, H100, False, 1.08, None),  # nothing known: as it is
        ((12_000.0, 600.0), True, None, False, False, H100, False, 1.08, False),  # u = 1.0 exactly: not > 1, no slack
        ((3_000.0, 300.0), True, True, False, False, H100, False, 1.08, None),  # met at u 0.3: slack not judged
    ],
)
def test_learn_capacity(load, ttft_met, tpot_met, slack, queued, expected, infeasible, sized, probed) -> None:
    # sized = u x headroom: 1.08 (the docstring's 0.9 x 1.2), 0.85 where a scale-down is pending
    got, flagged, did_probe = learn_capacity(H100, load, ttft_met, tpot_met, slack, queued, 1.1, sized)
    assert got == pytest.approx(expected)
    assert flagged is infeasible
    assert did_probe is probed


def test_learn_capacity_probes_by_the_step_given() -> None:
    # docstring: a slow start's fourth probe, 1.016: (15,240, 3,048); never above the step
    grown, _, probed = learn_capacity(H100, (9_000.0, 900.0), True, True, True, False, 1.1, 1.08, 1.016)
    assert (grown, probed) == (pytest.approx((15_240.0, 3_048.0)), True)
    grown, _, _ = learn_capacity(H100, (9_000.0, 900.0), True, True, True, False, 1.1, 1.08, 1.6)
    assert grown == pytest.approx((16_500.0, 3_300.0))
    still, _, probed = learn_capacity(H100, (9_000.0, 900.0), True, True, True, False, 1.0, 1.08, 1.016)
    assert (still, probed) == (H100, None)  # step 1: nothing moves, nothing counted


@pytest.mark.parametrize(
    ("doublings", "expected"),
    [(0, 1.002), (3, 1.016), (6, 1.1), (None, 1.002),  # docstring, step 1.1
     (1, 1.004), (MAX_PROBE_DOUBLINGS, 1.1)],
)
def test_probe_ratio(doublings, expected) -> None:
    assert probe_ratio(doublings, 1.1) == pytest.approx(expected)
    assert probe_ratio(doublings, 1.0) == 1.0  # step 1: learning frozen


@pytest.mark.parametrize(
    ("doublings", "probed", "expected"),
    [(3, True, 4), (3, False, None), (3, None, 3), (None, True, None),  # docstring
     (0, True, 1), (None, None, None), (None, False, None), (MAX_PROBE_DOUBLINGS, True, MAX_PROBE_DOUBLINGS)],
)
def test_slow_start(doublings, probed, expected) -> None:
    assert slow_start(doublings, probed) == expected


def test_learn_capacity_probes_from_half_load_and_never_with_step_one() -> None:
    # docstring: with step 1.2 the TTFT breach shrinks Cp to the observed load, 0.6 / 0.7
    shrunk, _, _ = learn_capacity(H100, (9_000.0, 900.0), False, True, False, False, 1.2, 1.0)
    assert shrunk == pytest.approx((15_000.0 * 0.6 / 0.7, 3_000.0))
    grown, _, _ = learn_capacity(H100, (4_500.0, 600.0), True, True, True, False, 1.1, 1.0)  # u = 0.5, headroom 2
    assert grown == pytest.approx((15_030.0, 3_006.0))
    still, _, _ = learn_capacity(H100, (18_000.0, 2_400.0), True, True, True, False, 1.0, 2.0)  # step 1 = never learn
    assert still == H100
    still, _, _ = learn_capacity(H100, (18_000.0, 2_400.0), True, True, False, True, 1.0, 2.0)  # queued too
    assert still == H100
    still, _, _ = learn_capacity(H100, (18_000.0, 2_400.0), False, True, False, False, 1.0, 2.0)  # broken at u 2
    assert still == H100


@pytest.mark.parametrize(
    ("capacity", "expected"),
    [((400_000.0, 100.0), (1_500.0, 150.0)), ((16_500.0, 3_300.0), (16_500.0, 3_300.0)),  # docstring
     ((60_000.0, 3_000.0), (30_000.0, 3_000.0)), ((15_000.0, 9_000.0), (15_000.0, 6_000.0))],
)
def test_within_drift(capacity, expected) -> None:
    assert within_drift(capacity, H100) == pytest.approx(expected)
    assert MAX_DRIFT_RATIO == 20.0


@pytest.mark.parametrize(
    ("arrivals", "completed", "window", "expected"),
    [(5.2, 4.0, 4.0, 1.3), (None, 4.0, None, 1.0), (5.2, None, None, 1.0), (5.2, 0.0, 0.0, 1.0),  # docstring
     (52.0, 130.0, 39.0, 52.0 / 39.0),  # docstring: a burst; against this tick's 130 it read 0.4
     (5.2, 4.0, None, 1.3),  # the window's throughput unknown: this tick's
     (17.5, 1.2, 1.2, 1.5)],  # docstring: a load jump, capped
)
def test_demand_scale(arrivals, completed, window, expected) -> None:
    assert demand_scale(demand(arrivals, completed, window=window), 1.5) == pytest.approx(expected)


def test_starting_state() -> None:
    learned = SloState(cold_start=H100, capacity_prompt_tokens_per_second=20_000.0,
                       capacity_generation_tokens_per_second=4_000.0)
    assert starting_state(learned, H100) is learned
    # docstring: the cold start changed to (5,000, 1,800): start over
    assert starting_state(learned, (5_000.0, 1_800.0)) == SloState(cold_start=(5_000.0, 1_800.0))


def test_judge() -> None:
    # docstring: target 0.99, attainments 0.995 and None, u 0.8
    assert judge((0.995, None), 0.99, 0.8, False) == (True, None, False)
    assert judge((0.995, None), 0.99, 0.8, True) == (True, None, True)
    assert judge((0.995, None), 0.99, 0.3, True) == (True, None, False)  # slack only from half load
    assert judge((0.995, None), 0.99, 1.2, True) == (True, None, False)  # nor above the estimate
    assert judge((0.9, None), 0.99, 0.8, False) == (False, None, False)
    assert judge((None, 0.99), 0.99, 0.8, False) == (None, True, False)


def test_with_slack() -> None:
    # docstring: target 0.99, TTFT bound 2 s (slack within 1 s)
    ttft = hist((1.0, 2.0, INF), (97.0, 99.5, 100.0), NOW)  # within 1 s: 0.97; within 2 s: 0.995
    r = SloReading(1.0, 1.0, (ttft,), (), 100.0, 0.0, 1, False, 1)
    assert with_slack(r, 2.0, SloParams(), (0.995, None), 1.0) is False
    fast = hist((1.0, 2.0, INF), (99.5, 99.9, 100.0), NOW)  # within 1 s: 0.995
    r = SloReading(1.0, 1.0, (fast,), (), 100.0, 0.0, 1, False, 1)
    assert with_slack(r, 2.0, SloParams(), (0.999, None), 1.0) is True
    assert with_slack(r, 2.0, SloParams(), (0.999, 0.9), 1.0) is False  # TPOT broken
    assert with_slack(r, 2.0, SloParams(), (None, None), 1.0) is False  # nothing known
    # a known attainment whose histogram has too few requests to judge the tighter bound: no slack
    assert with_slack(r, 2.0, SloParams(), (0.999, None), 1_000.0) is False


def test_assess_slo_docstring_example() -> None:
    # 2 served pods, 3,000 prompt and 750 generated tokens/s each, cold start (15,000, 3,000):
    # one replica 0.2 + 0.25 = 0.45; replicas 0.4 + 0.5 = 0.9 before the headroom
    p = PolicyParams(capacity_profile="llama-3-8b/h100")
    pods = (slo_pod("a", NOW, 3_000.0, 750.0), slo_pod("b", NOW, 3_000.0, 750.0))
    s = assess_slo(p, pods, 2, True, demand(), SloState(), NOW)
    assert s is not None
    assert (s.utilisation, s.base_replicas, s.capacity, s.capacity_learned) == (
        pytest.approx(0.45), pytest.approx(0.9), H100, False)
    assert s.state == SloState(cold_start=H100)
    assert s.demand_units == pytest.approx(0.9)
    # with an arrival estimate 1.3 x the completions: 1.17
    s = assess_slo(p, pods, 2, True, demand(5.2, 4.0), SloState(), NOW)
    assert s is not None and s.base_replicas == pytest.approx(0.9 * 1.3)
    # no series at all: no signal
    assert assess_slo(p, (slo_pod("a", NOW, None, None),), 1, True, demand(), SloState(), NOW) is None


def test_series_gone_after_they_came_is_partial() -> None:
    # docstring: a state learned from (15,000, 3,000) (here the H100 row's cold start) and no
    # series this tick: partial, no replicas asked for, the capacity kept
    p = PolicyParams(capacity_profile="llama-3-8b/h100")
    learned = SloState(cold_start=H100).learned((20_000.0, 4_000.0))
    s = assess_slo(p, (slo_pod("a", NOW, None, None),), 1, True, demand(), learned, NOW)
    assert s is not None and s.partial and s.base_replicas == 0.0 and s.utilisation is None
    assert (s.capacity, s.capacity_learned, s.state) == ((20_000.0, 4_000.0), True, learned)
    seen = SloState(cold_start=H100)  # seen, nothing learned yet: the cold start, partial
    s = assess_slo(p, (slo_pod("a", NOW, None, None),), 1, True, demand(), seen, NOW)
    assert s is not None and s.partial and (s.capacity, s.capacity_learned) == (H100, False)


def test_a_fleet_whose_slo_series_vanish_does_not_fall_to_the_queue_signals() -> None:
    """Token rates on every pod, then on none (a relabel rule drops the counters): the fleet
    held at 5 while some pods lacked them, but fell to 1 replica within 20 minutes when all did,
    the queue and KV signals deciding alone (found by a review). It holds now."""
    params = PolicyParams(capacity_prompt_tokens_per_second=15_000, capacity_generation_tokens_per_second=3_000)

    def run(series_until_tick: int, ticks: int = 120) -> tuple[int, Reason]:
        state, spec, t = PolicyState(), 4, NOW
        for tick in range(ticks):  # 15 s ticks (120: 30 minutes), the fleet's load constant
            has = tick < series_until_tick
            ready = tuple(slo_pod(f"p{i}", t - 5, 20_000.0 / spec if has else None, 6_000.0 / spec if has else None,
                                  running=8.0 / spec, kv=0.5) for i in range(spec))
            d, state = decide(params, Observation(spec_replicas=spec, ready_pods=ready), state, t)
            spec, t = d.desired_replicas, t + 15
        return spec, d.reason

    at_ten_minutes, _ = run(40, ticks=40)
    gone, reason = run(40)  # 10 minutes with the series, then 20 without
    assert at_ten_minutes >= 4 and gone == at_ten_minutes and reason is Reason.HOLD_METRICS_UNHEALTHY
    assert run(0)[0] < at_ten_minutes  # never had them: the queue and KV signals decide (a vLLM without them)


def test_add_headroom_docstring_example() -> None:
    # base 0.9, 50 samples with mean 0.05 and variance 0.01, target 0.99: ratio 1.327, replicas 1.19
    p = PolicyParams(capacity_profile="llama-3-8b/h100")
    pods = (slo_pod("a", NOW, 3_000.0, 750.0), slo_pod("b", NOW, 3_000.0, 750.0))
    state = SloState(cold_start=H100, demand_history=((NOW - 10, 0.9),), growth_mean=0.05,
                     growth_variance=0.01, growth_samples=50, growth_updated_at=NOW - 10)
    s = assess_slo(p, pods, 2, True, demand(), state, NOW)
    assert s is not None
    ratio, out = add_headroom(s, p, 300.0, NOW)  # the newest reading is 10 s < 300 / 16 old: no new one
    assert ratio == pytest.approx(math.exp(0.05 + normal_quantile(0.99) * 0.1))
    assert ratio == pytest.approx(1.327, abs=1e-3)
    assert s.base_replicas * ratio == pytest.approx(1.19, abs=1e-2)
    assert out is s.state
    # the demand now (0.9) at 0.9 of its lead time's level ((1.1 + 0.9) / 2 = 1.0): sized from
    # the level, 1.327 / 0.9 = 1.474
    below = assess_slo(p, pods, 2, True, demand(), replace(state, demand_history=((NOW - 10, 1.1),)), NOW)
    assert below is not None
    assert add_headroom(below, p, 300.0, NOW)[0] == pytest.approx(math.exp(0.05 + normal_quantile(0.99) * 0.1) / 0.9)
    assert add_headroom(below, p, 300.0, NOW)[0] == pytest.approx(1.474, abs=1e-3)
    # without token rates: no headroom, the state as it is
    bare = assess_slo(p, (slo_pod("a", NOW, None, None, ttft=hist((1.0, INF), (1.0, 1.0), NOW)),), 1, True,
                      demand(), state, NOW)
    assert bare is not None and bare.prompt_tokens_per_second is None
    assert add_headroom(bare, p, 300.0, NOW) == (1.0, bare.state)


# --- headroom ------------------------------------------------------------------------------------
def test_demand_units() -> None:
    assert demand_units(30_000.0, 4_500.0, H100) == pytest.approx(3.5)  # docstring: 2 + 1.5


@pytest.mark.parametrize(("now", "expected"), [(1000.0, 1), (970.0, 0), (950.0, None)])
def test_reference_index(now: float, expected: int | None) -> None:
    # docstring: readings at 800, 840, 990, H = 160 s
    assert reference_index(((800.0, 1.0), (840.0, 2.0), (990.0, 2.5)), now, 160.0) == expected


@pytest.mark.parametrize(("index", "expected"), [(3, (1, 3.0)), (2, (0, 4.0)), (0, (0, 1.0))])
def test_reference_base(index: int, expected: tuple[int, float]) -> None:
    # docstring: for 840 the readings since 680, level 3.0: (1, 3.0); for 800 650 counts too,
    # level 2.33, base 4.0: (0, 4.0); the oldest alone is its own level
    got = reference_base(((650.0, 1.0), (700.0, 2.0), (800.0, 4.0), (840.0, 3.0)), index, 160.0)
    assert got == (expected[0], pytest.approx(expected[1]))


def test_track_headroom_grows_from_the_base_and_keeps_what_the_next_base_needs() -> None:
    # readings at 650, 700, 800, 840, 990, H = 160 s, D 4.5 at 1000: the reference is 840, its
    # base 3.0 (the level of 700, 800, 840); the recent mean (2.5 + 4.5) / 2 = 3.5 (990 is within
    # H / 2 = 80 s): growth ln(3.5 / 3); 650 is no longer needed
    s = SloState(demand_history=((650.0, 1.0), (700.0, 2.0), (800.0, 4.0), (840.0, 3.0), (990.0, 2.5)))
    out = track_headroom(s, 4.5, 1000.0, 160.0, 1800.0)
    assert out.growth_mean == pytest.approx(math.log(3.5 / 3.0)) and out.growth_samples == 1
    assert out.demand_history == ((700.0, 2.0), (800.0, 4.0), (840.0, 3.0), (990.0, 2.5), (1000.0, 4.5))
    # no reading H old yet (800 is 100 s old at 900): a reading, no sample
    young = SloState(demand_history=((800.0, 4.0), (840.0, 3.0)))
    out = track_headroom(young, 4.5, 900.0, 160.0, 1800.0)
    assert out.growth_samples == 0 and out.demand_history == ((800.0, 4.0), (840.0, 3.0), (900.0, 4.5))


@pytest.mark.parametrize(
    ("history", "now", "demand_now", "expected"),
    [
        (((830.0, 4.0), (900.0, 3.0), (990.0, 2.5)), 1000.0, 2.5, (3.0 + 2.5 + 2.5) / 3 / 2.5),  # docstring: 1.067
        (((830.0, 4.0), (900.0, 3.0), (990.0, 2.5)), 1000.0, 4.0, 1.0),  # docstring: above its level
        (((830.0, 4.0), (900.0, 3.0), (1000.0, 2.0)), 1000.0, 2.0, 2.5 / 2.0),  # the newest reading is now's
        ((), 1000.0, 2.0, 1.0),  # no history: the demand is its own level
        (((990.0, 3.0),), 1000.0, math.nan, 1.0),  # no demand to size: nothing
    ],
)
def test_base_ratio(history: tuple[tuple[float, float], ...], now: float, demand_now: float, expected: float) -> None:
    assert base_ratio(history, now, demand_now, 160.0) == pytest.approx(expected)


@pytest.mark.parametrize(
    ("free_gpus", "to_add", "gpus_per_replica", "expected"),
    [
        (0, 0, 1, 390.0),  # docstring: no free GPU, nothing to add: load + node
        (1, 0, 1, 90.0),  # docstring: the next replica fits
        (1, 1, 1, 390.0),  # docstring: the one to add fits, the next does not
        (3, 2, 1, 90.0),  # docstring: 3 free hold the 2 and the next
        (1, 2, 1, 390.0),  # 2 to add need 2 GPUs
        (1, 0, 2, 390.0),  # a replica of 2 GPUs does not fit in 1
        (None, 0, 1, 390.0),  # free GPUs unknown: a node counts (the safe side)
    ],
)
def test_headroom_horizon(free_gpus: int | None, to_add: int, gpus_per_replica: int, expected: float) -> None:
    lead = LeadTimeEstimate(90.0, 300.0, False, False)
    assert headroom_horizon(free_gpus, to_add, gpus_per_replica, lead) == expected


@pytest.mark.parametrize(
    ("lead", "demand", "expected"),
    [
        (40.0, 5.0, (4.0 + 5.0) / 2),  # docstring: 20 s back, 990 only: 4.5
        (80.0, 5.0, (3.0 + 4.0 + 5.0) / 3),  # 40 s back: 960 counts (the bound is inclusive)
        (240.0, 5.0, (2.0 + 3.0 + 4.0 + 5.0) / 4),  # docstring: 120 s back, all three: 3.5
        (8.0, 5.0, 5.0),  # 4 s back: none, the demand alone
    ],
)
def test_recent_mean(lead: float, demand: float, expected: float) -> None:
    assert recent_mean(((900.0, 2.0), (960.0, 3.0), (990.0, 4.0)), 1000.0, demand, lead) == pytest.approx(expected)


def test_recent_mean_of_readings_near_the_float_limit_stays_finite() -> None:
    # a sum of three readings of 1e308 would be inf (a growth of +100 recorded); the mean is 1e308
    history = ((990.0, 1e308), (995.0, 1e308))
    assert recent_mean(history, 1000.0, 1e308, 400.0) == pytest.approx(1e308)


def test_a_blip_is_not_held_as_growth() -> None:
    # a flat demand of 10, a reading every 20 s for 600 s, H = 300 s; a blip to 20 at 620: the
    # sample averages it with the 7 readings of the last 150 s (H / 2): ln(90 / 80) = 0.118, not
    # ln 2 = 0.693 (the fleet is still sized on the 20: `base_ratio`)
    flat = SloState(demand_history=tuple((10_000.0 + 20.0 * i, 10.0) for i in range(31)))
    out = track_headroom(flat, 20.0, 10_620.0, 300.0, 1800.0)
    assert (out.growth_samples, out.growth_mean) == (1, pytest.approx(math.log(90.0 / 80.0)))


def test_update_moments() -> None:
    # docstring: mean 0.1, var 0.01, 1800 s ago, half-life 1800: weight 0.5; sample 0.3:
    # mean 0.2, variance 0.5 x (0.01 + 0.5 x 0.04) = 0.015
    assert update_moments((0.1, 0.01, 5, 0.0), 0.3, 1800.0, 1800.0) == pytest.approx((0.2, 0.015, 6, 1800.0))
    assert update_moments((0.1, 0.01, 5, 1800.0), 0.3, 1800.0, 1800.0) == (0.1, 0.01, 5, 1800.0)  # same now
    assert update_moments((0.0, 0.0, 0, None), 0.3, 1800.0, 1800.0) == (0.3, 0.0, 1, 1800.0)  # first sample
    # docstring: moments restored after a restart (no time) are kept; the sample starts the clock
    assert update_moments((0.1, 0.01, 20, None), 0.3, 1000.0, 1800.0) == (0.1, 0.01, 20, 1000.0)


@pytest.mark.parametrize(
    ("mean", "variance", "samples", "cold_floor", "expected"),
    [
        (0.05, 0.01, 50, True, math.exp(0.05 + 2.3263478740408408 * 0.1)),  # docstring: 1.327
        (0.05, 0.01, 3, True, math.exp(0.05 + 2.3263478740408408 * COLD_START_SD)),  # docstring: 1.49
        (0.05, 0.01, 3, False, math.exp(0.05 + 2.3263478740408408 * 0.1)),  # docstring: slack, no floor: 1.327
        (0.0, 0.0, 0, True, math.exp(2.3263478740408408 * COLD_START_SD)),  # no sample yet: 1.418
        (0.0, 0.0, 0, False, 1.0),  # no sample yet, slack: 1
        (-0.5, 0.01, 50, True, 1.0),  # docstring: a falling demand needs no headroom
        (0.0, 1.0, 50, True, 2.0),  # docstring: capped
        (0.0, 0.0, 50, True, 1.0),  # smooth traffic: none
    ],
)
def test_headroom_ratio(mean: float, variance: float, samples: int, cold_floor: bool, expected: float) -> None:
    s = SloState(growth_mean=mean, growth_variance=variance, growth_samples=samples)
    assert headroom_ratio(s, 0.99, 2.0, cold_floor) == pytest.approx(expected)


def test_normal_quantile() -> None:
    assert normal_quantile(0.99) == pytest.approx(2.326, abs=1e-3) and normal_quantile(0.5) == 0.0


def test_track_headroom_docstring_example() -> None:
    s = SloState(demand_history=((800.0, 1.0), (840.0, 2.0), (990.0, 2.5)))
    out = track_headroom(s, 3.0, 1000.0, 160.0, 1800.0)
    assert out.demand_history == ((800.0, 1.0), (840.0, 2.0), (990.0, 2.5), (1000.0, 3.0))
    # docstring: base 2.0, recent mean (2.5 + 3.0) / 2 = 2.75: ln 1.375 = 0.318
    assert (out.growth_mean, out.growth_samples, out.growth_updated_at) == (pytest.approx(math.log(1.375)), 1, 1000.0)
    assert track_headroom(s, 3.0, 995.0, 160.0, 1800.0) is s  # 5 s after the newest: no reading yet
    assert track_headroom(SloState(), 0.0, 1000.0, 160.0, 1800.0) == SloState()  # nothing to log


@settings(max_examples=300, deadline=None)
@given(st.lists(st.tuples(st.floats(0.5, 60.0), st.floats(0.01, 1e4)), min_size=1, max_size=60),
       st.floats(30.0, 900.0), st.floats(0.01, 1e4), st.floats(0.0, 120.0))
def test_headroom_base_properties(steps: list[tuple[float, float]], lead: float, demand_now: float, after: float) -> None:
    # any time-ordered history of positive readings: the base ratio is >= 1 and finite; a
    # reference's base lies between its own demand and the largest reading; a reading keeps the
    # history time-ordered, the growth finite, and drops no reading the next base needs
    t, history = 10_000.0, []
    for gap, d in steps:
        t += gap
        history.append((t, d))
    h = tuple(history)
    now = t + after
    ratio = base_ratio(h, now, demand_now, lead)
    assert 1.0 <= ratio < math.inf
    ref = reference_index(h, now, lead)
    if ref is not None:
        first, base = reference_base(h, ref, lead)
        assert first <= ref and h[ref][1] <= base <= max(d for _, d in h[first:ref + 1]) * (1 + 1e-12)  # a mean's rounding
    out = track_headroom(SloState(demand_history=h), demand_now, now, lead, 1800.0)
    kept = out.demand_history
    assert all(b[0] > a[0] for a, b in zip(kept, kept[1:], strict=False))
    assert math.isfinite(out.growth_mean) and out.growth_variance >= 0.0
    if now - h[-1][0] >= lead / READINGS_PER_LEAD_TIME and ref is not None:  # a reading was taken
        assert kept[-1] == (now, demand_now)
        assert kept[0][0] >= h[ref][0] - lead  # only what the reference's base averages, and newer
        assert kept[:-1] == h[reference_base(h, ref, lead)[0]:]


def run_demand(series: list[float], lead: float = 300.0, tick: float = 15.0) -> SloState:
    state = SloState()
    for i, d in enumerate(series):
        state = track_headroom(state, d, 10_000.0 + i * tick, lead, 1800.0)
    return state


def test_bursty_traffic_gets_headroom_smooth_traffic_little() -> None:
    smooth = run_demand([10.0] * 400)
    bursty = run_demand([10.0 if (i // 20) % 2 else 25.0 for i in range(400)])  # 5-minute bursts x2.5
    assert smooth.growth_samples >= 20 and bursty.growth_samples >= 20
    assert headroom_ratio(smooth, 0.99, 2.0) == pytest.approx(1.0)
    assert headroom_ratio(bursty, 0.99, 2.0) > 1.5
    assert len(bursty.demand_history) <= 35  # bounded: ~16 readings per lead time, two lead times


# --- the signal that bound ------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("forecast", "slo", "expected"),
    [(5.0, 5.5, "slo"), (5.0, 3.0, "forecast"), (4.0, 0.0, "queue")],  # docstring rows
)
def test_bound_signal(forecast: float, slo: float, expected: str) -> None:
    d = Demand(10.0, 8.0, 1.0, 2, None, None, None, "batch", 4.0, 1.0)
    signal = None
    if slo:
        p = PolicyParams()
        signal = assess_slo(p, (slo_pod("a", NOW, 1.0, 1.0),), 1, True, d, SloState(), NOW)
        assert signal is not None
    sizing = Sizing(d, Forecast(0.0, 0.0, forecast), 4.0, 300.0, (), (), (), signal, None, slo)
    assert bound_signal(sizing) == expected
    assert bound_signal(Sizing(None, None, 0.0, 300.0, (), (), ())) == "none"  # docstring: no demand


# --- persistence ---------------------------------------------------------------------------------
def test_slo_state_round_trip() -> None:
    s = SloState(cold_start=H100, capacity_prompt_tokens_per_second=16_500.0,
                 capacity_generation_tokens_per_second=3_300.0, demand_history=((900.0, 2.0), (950.0, 2.5)),
                 growth_mean=0.1, growth_variance=0.02, growth_samples=7, growth_updated_at=950.0)
    assert SloState.from_dict(s.to_dict()) == s
    assert SloState.from_dict(SloState().to_dict()) == SloState()
    for doublings in (None, 5, MAX_PROBE_DOUBLINGS):
        probing = s.probing(doublings)
        assert SloState.from_dict(probing.to_dict()) == probing
    # written before the slow start: a learned estimate keeps the base step (ended), a state
    # that has learned nothing starts the slow start
    older = {k: v for k, v in s.probing(5).to_dict().items() if k != "probe_doublings"}
    assert SloState.from_dict(older).probe_doublings is None
    unlearned = {k: v for k, v in SloState(cold_start=H100).to_dict().items() if k != "probe_doublings"}
    assert SloState.from_dict(unlearned).probe_doublings == 0


@pytest.mark.parametrize(
    "change",
    [
        {"version": 2},
        {"capacity_prompt_tokens_per_second": -1.0},
        {"capacity_prompt_tokens_per_second": math.nan},
        {"capacity_generation_tokens_per_second": None},  # one learned without the other
        {"cold_start": None},  # learned without a cold start
        {"cold_start": [1.0]},
        {"demand_history": [[900.0, 0.0]]},  # a demand that cannot be logged
        {"demand_history": [[950.0, 1.0], [900.0, 1.0]]},  # out of order
        {"demand_history": [[950.0]]},
        {"growth_variance": -0.1},
        {"growth_samples": -1},
        {"growth_samples": True},
        {"growth_mean": "0.1"},
        {"growth_updated_at": math.inf},
        {"probe_doublings": -1},
        {"probe_doublings": MAX_PROBE_DOUBLINGS + 1},
        {"probe_doublings": True},
        {"probe_doublings": 1.0},
        {"probe_doublings": "3"},
    ],
)
def test_slo_state_rejects_bad_data(change: dict[str, object]) -> None:
    data = SloState(cold_start=H100, capacity_prompt_tokens_per_second=16_500.0,
                    capacity_generation_tokens_per_second=3_300.0).to_dict() | change
    with pytest.raises(ValueError, match="SLO state"):
        SloState.from_dict(data)
    with pytest.raises(ValueError):
        SloState.from_dict("not a mapping")  # type: ignore[arg-type]


# --- never down while the SLO is broken ------------------------------------------------------------
def _slo_sizing(ttft: float | None, tpot: float | None, infeasible: bool = False) -> Sizing:
    signal = SloSignal(5.0, 1.0, 1.0, H100, False, 2.0, ttft, tpot, 0.9, infeasible, False, 1.0, SloState())
    d = Demand(0.0, 0.0, 0.0, 0, None, None, None, "batch", 5.0, 0.0)
    return Sizing(d, Forecast(0.0, 0.0, 5.0), 5.0, 300.0, (), (), (), slo=signal, slo_replicas=5.0)


@pytest.mark.parametrize(
    ("rec", "slo", "expected"),
    [
        (Recommendation(5), _slo_sizing(0.7, None), Recommendation(6, Reason.HOLD_SLO_BROKEN)),  # docstring
        (Recommendation(5), _slo_sizing(0.995, None), Recommendation(5)),  # docstring: met
        (Recommendation(5), _slo_sizing(0.7, None, infeasible=True), Recommendation(5)),  # docstring: infeasible
        (Recommendation(7), _slo_sizing(0.7, None), Recommendation(7)),  # docstring: up stands
        (Recommendation(5), _slo_sizing(1.0, 0.9), Recommendation(6, Reason.HOLD_SLO_BROKEN)),  # TPOT broken
        (Recommendation(5), _slo_sizing(None, None), Recommendation(5)),  # too few requests to tell
    ],
)
def test_hold_while_slo_broken(rec: Recommendation, slo: Sizing, expected: Recommendation) -> None:
    assert hold_while_slo_broken(rec, 6, slo, PolicyParams()) == expected


# --- the tolerance does not hold a scale-up while the SLO is broken ------------------------------------
def _slo_asks(replicas: float, ttft: float | None, tpot: float | None, infeasible: bool = False) -> Sizing:
    """A sizing whose SLO step asks for `replicas` (demand and forecast ask for less), at these
    attainments."""
    signal = SloSignal(replicas, 1.0, 1.0, H100, False, 2.0, ttft, tpot, 0.9, infeasible, False, 1.0, SloState())
    d = Demand(0.0, 0.0, 0.0, 0, None, None, None, "batch", 1.0, 0.0)
    return Sizing(d, Forecast(0.0, 0.0, 1.0), 1.0, 300.0, (), (), (), slo=signal, slo_replicas=replicas)


FOUR_READY_SLO = Observation(spec_replicas=4, ready_pods=tuple(
    slo_pod(f"p{i}", 1000.0, 9_000.0, 900.0, hist((0.5, 2.0, INF), (1.0, 1.0, 1.0), 1000.0),
            hist((0.05, 0.1, INF), (1.0, 1.0, 1.0), 1000.0)) for i in range(4)))


@pytest.mark.parametrize(
    ("s", "expected"),
    [
        (_slo_asks(4.2, 1.0, 0.98), Recommendation(5)),  # docstring: broken, asks more: 5
        (_slo_asks(3.8, 1.0, 0.98), Recommendation(4, Reason.HOLD_WITHIN_TOLERANCE)),  # docstring: asks less
        (_slo_asks(4.2, 1.0, 0.995), Recommendation(4, Reason.HOLD_WITHIN_TOLERANCE)),  # met: the tolerance holds
        (_slo_asks(4.2, 0.7, None, infeasible=True), Recommendation(4, Reason.HOLD_WITHIN_TOLERANCE)),  # infeasible
        (_slo_asks(4.2, None, None), Recommendation(4, Reason.HOLD_WITHIN_TOLERANCE)),  # too few requests to tell
    ],
)
def test_recommend_past_the_tolerance_while_the_slo_is_broken(s: Sizing, expected: Recommendation) -> None:
    assert recommend(s, FOUR_READY_SLO, PolicyParams()) == expected


@pytest.mark.parametrize(
    ("ttft", "tpot", "infeasible", "expected"),
    [
        (0.7, None, False, True),  # docstring
        (1.0, 0.98, False, True),  # docstring
        (0.995, None, False, False),  # docstring
        (0.7, None, True, False),  # docstring: infeasible at low load
        (0.99, 0.99, False, False),  # at the target exactly: met
    ],
)
def test_slo_broken(ttft: float | None, tpot: float | None, infeasible: bool, expected: bool) -> None:
    assert slo_broken(_slo_asks(4.0, ttft, tpot, infeasible), PolicyParams()) is expected


def test_slo_broken_without_an_slo_signal() -> None:  # docstring: no SLO signal
    s = _slo_asks(4.0, 0.5, 0.5)
    assert slo_broken(Sizing(s.demand, s.forecast, 1.0, 300.0, (), (), ()), PolicyParams()) is False
