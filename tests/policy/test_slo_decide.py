"""decide() with the SLO series: table tests with explicit `now`, the arithmetic in the comments,
and properties over random SLO data (hypothesis)."""

from __future__ import annotations

import math

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from autoscaler.policy import (
    Decision,
    MetricSample,
    Observation,
    PolicyParams,
    PolicyState,
    ReadyPod,
    Reason,
    SampleHealth,
    decide,
)
from autoscaler.policy.capacity_table import cold_start_capacity
from autoscaler.policy.headroom import COLD_START_SD, normal_quantile
from autoscaler.policy.limits import bounds
from autoscaler.policy.slo_capacity import MAX_DRIFT_RATIO
from autoscaler.policy.types import COLD_SLO_STATE, LatencyHistogram, PodStage, SloState

from .builders import flying, hist, obs, pods, slo_pod
from .test_properties import observations, params, states

NOW = 10_000.0
INF = math.inf
H100 = PolicyParams(capacity_profile="llama-3-8b/h100")  # cold start (15,000, 3,000)
COLD_HEADROOM = math.exp(normal_quantile(0.99) * COLD_START_SD)  # 1.418: no growth sample yet
# a history whose demand grew with sd 0.15 over one lead time: headroom exp(2.326 x 0.15) = 1.418
BURSTY = PolicyState(slo=SloState(cold_start=(15_000.0, 3_000.0), growth_variance=0.15**2, growth_samples=30))
HEADROOM = math.exp(normal_quantile(0.99) * 0.15)
# a history of many samples whose demand never grew: headroom 1 (past the cold-start floor)
SMOOTH = SloState(cold_start=(15_000.0, 3_000.0), growth_samples=30)

# 10 requests/s per pod; TTFT: 5 within 1 s, 8 within 2.5 s -> within 2 s: 5 + 3 / 1.5 = 7 (0.7)
SLOW_TTFT = hist((1.0, 2.5, INF), (5.0, 8.0, 10.0), NOW)
FAST_TTFT = hist((1.0, 2.5, INF), (10.0, 10.0, 10.0), NOW)  # all within 1 s
FAST_TPOT = hist((0.05, 0.1, INF), (10.0, 10.0, 10.0), NOW)  # all within 50 ms


def run(o: Observation, state: PolicyState | None = None, params: PolicyParams = H100) -> tuple[Decision, PolicyState]:
    return decide(params, o, state or PolicyState(), NOW)


@pytest.mark.parametrize(("free_gpus", "with_node"), [(8, False), (0, True), (None, True)])
def test_the_headroom_covers_the_next_replicas_lead_time(free_gpus: int | None, with_node: bool) -> None:
    # the same fleet, nothing to add beyond it (u = 0.9 x 1.418 = 1.28 -> 2 replicas for 2): the
    # step's lead time is the model load alone, but the next replica waits for a node when no GPU
    # is free (or none is known to be): the headroom's horizon is then load + node
    ready = tuple(slo_pod(f"p{i}", NOW, 9_000.0, 900.0, FAST_TTFT, FAST_TPOT) for i in range(2))
    d, _ = run(obs(2, ready, free_gpus=free_gpus))
    load, node = H100.model_load_seconds_default, H100.node_provision_seconds_default
    assert d.values.lead_time_seconds == load
    assert d.values.headroom_horizon_seconds == load + (node if with_node else 0.0)


def test_slo_broken_below_capacity_shrinks_it_and_scales_up() -> None:
    # 2 pods, each 9,000 prompt and 900 generated tokens/s: u = 0.6 + 0.3 = 0.9 < 1, yet TTFT
    # attainment 0.7 < 0.99: Cp shrinks toward the load (0.6 / 0.7), at most by 1 / 1.1: 13,636.
    # u = 0.66 + 0.3 = 0.96; SLO replicas 2 x 0.96 x 1.418 (cold headroom) = 2.72 -> 3.
    # KV asks for 2 x 0.5 / 0.8 = 1.25 only.
    ready = tuple(slo_pod(f"p{i}", NOW, 9_000.0, 900.0, SLOW_TTFT, FAST_TPOT) for i in range(2))
    d, state = run(obs(2, ready, free_gpus=8))
    assert (d.desired_replicas, d.reason) == (3, Reason.SCALE_UP_SLO)
    v = d.values
    assert v.capacity_prompt_tokens_per_second == pytest.approx(15_000 / 1.1)
    assert v.capacity_generation_tokens_per_second == 3_000.0
    assert (v.capacity_learned, v.slo_infeasible_at_low_load, v.bound_signal) == (True, False, "slo")
    assert (v.ttft_attainment, v.tpot_attainment) == (pytest.approx(0.7), pytest.approx(1.0))
    assert v.slo_utilisation == pytest.approx(9_000 / (15_000 / 1.1) + 0.3)
    assert v.headroom_ratio == pytest.approx(COLD_HEADROOM)
    assert v.slo_replicas == pytest.approx(2 * (9_000 / (15_000 / 1.1) + 0.3) * COLD_HEADROOM)
    assert (v.slo_ttft_seconds, v.slo_tpot_seconds, v.slo_attainment_target) == (2.0, 0.1, 0.99)
    assert (v.prompt_tokens_per_second, v.generation_tokens_per_second) == (18_000.0, 1_800.0)
    assert state.slo.capacity_prompt_tokens_per_second == pytest.approx(15_000 / 1.1)
    assert SloState.from_dict(state.slo.to_dict()) == state.slo  # what the controller persists


def test_slo_met_above_capacity_grows_it_to_the_load_at_once() -> None:
    # 2 pods at 18,000 prompt and 2,400 generated tokens/s: u = 1.2 + 0.8 = 2.0 with the SLO met
    # and no queue: the replicas carried that load within the SLO, so the capacity is at least
    # the load: both x u = 2, (30,000, 6,000), at once (not 1.1 a tick, which ordered 5.16 -> 6
    # replicas on a capacity the same tick had disproved); u = 0.6 + 0.4 = 1; SLO replicas
    # 2 x 1 x 1.418 (a bursty history's headroom) = 2.84 -> 3
    ready = tuple(slo_pod(f"p{i}", NOW, 18_000.0, 2_400.0, FAST_TTFT, FAST_TPOT) for i in range(2))
    d, state = run(obs(2, ready, free_gpus=8), BURSTY)
    assert (d.desired_replicas, d.reason) == (3, Reason.SCALE_UP_SLO)
    assert (d.values.capacity_prompt_tokens_per_second, d.values.capacity_generation_tokens_per_second) == (
        pytest.approx(30_000.0), pytest.approx(6_000.0))
    assert d.values.slo_utilisation == pytest.approx(1.0)
    assert d.values.slo_replicas == pytest.approx(2 * HEADROOM)
    # the next tick starts from the learned capacity: met with slack at u = 1: the probe, x1.002
    d2, _ = decide(H100, obs(2, ready, free_gpus=8), state, NOW + 15)
    assert d2.values.capacity_prompt_tokens_per_second == pytest.approx(30_060.0)


def test_the_probes_slow_start_doubles_its_step_until_slack_is_lost() -> None:
    # from the jump's (30,000, 6,000) at u = 1, met with slack: probes of 0.2, 0.4 and 0.8 % (the
    # slow start: each probe doubles the step's excess); then a tick met without slack (TTFT
    # within the 2 s bound, but 0.667 within 1 s) ends it for good: nothing learned, and the
    # next probe is 0.2 % again
    ready = tuple(slo_pod(f"p{i}", NOW, 18_000.0, 2_400.0, FAST_TTFT, FAST_TPOT) for i in range(2))
    _, state = run(obs(2, ready, free_gpus=8), BURSTY)
    assert state.slo.probe_doublings == 0  # the jump is no probe
    cp = 30_000.0
    for k, ratio in enumerate((1.002, 1.004, 1.008), start=1):
        d, state = decide(H100, obs(2, ready, free_gpus=8), state, NOW + 15 * k)
        cp *= ratio
        assert d.values.capacity_prompt_tokens_per_second == pytest.approx(cp)
        assert state.slo.probe_doublings == k
    tight = tuple(slo_pod(f"p{i}", NOW + 60, 18_000.0, 2_400.0, hist((1.5, 2.0, INF), (10.0, 10.0, 10.0), NOW + 60),
                          hist((0.05, 0.1, INF), (10.0, 10.0, 10.0), NOW + 60)) for i in range(2))
    d, state = decide(H100, obs(2, tight, free_gpus=8), state, NOW + 60)
    assert (d.values.capacity_prompt_tokens_per_second, state.slo.probe_doublings) == (pytest.approx(cp), None)
    again = tuple(slo_pod(f"p{i}", NOW + 75, 18_000.0, 2_400.0, hist((1.0, 2.5, INF), (10.0, 10.0, 10.0), NOW + 75),
                          hist((0.05, 0.1, INF), (10.0, 10.0, 10.0), NOW + 75)) for i in range(2))
    d, state = decide(H100, obs(2, again, free_gpus=8), state, NOW + 75)
    assert d.values.capacity_prompt_tokens_per_second == pytest.approx(cp * 1.002)
    assert state.slo.probe_doublings is None


def test_slo_met_above_capacity_with_a_queue_grows_by_the_step() -> None:
    # the same load, but the pods queue (2 waiting each): the window may not count the queued
    # requests yet, so the capacity grows by the step only: (16,500, 3,300)
    ready = tuple(slo_pod(f"p{i}", NOW, 18_000.0, 2_400.0, FAST_TTFT, FAST_TPOT, waiting=2.0) for i in range(2))
    d, state = run(obs(2, ready, free_gpus=8))
    assert d.desired_replicas > 2
    assert (d.values.capacity_prompt_tokens_per_second, d.values.capacity_generation_tokens_per_second) == (
        pytest.approx(16_500.0), pytest.approx(3_300.0))
    d2, _ = decide(H100, obs(2, ready, free_gpus=8), state, NOW + 15)
    assert d2.values.capacity_prompt_tokens_per_second == pytest.approx(18_150.0)


def learned(cp: float, cg: float, at: float = NOW - 5) -> SloState:
    """A learned capacity and a settled headroom (50 samples of no growth: ratio 1)."""
    return SloState(cold_start=(15_000.0, 3_000.0), capacity_prompt_tokens_per_second=cp,
                    capacity_generation_tokens_per_second=cg, demand_history=((at, 1.0),),
                    growth_samples=50, growth_updated_at=at)


def test_slo_met_with_a_learned_capacity_allows_scale_down() -> None:
    # learned (16,500, 3,300), 4 pods at 6,000 and 1,200 tokens/s: u = 0.36 + 0.36 = 0.73, met
    # with slack (everything within half the bounds), but the fleet is larger than the estimate
    # asks (u x headroom 1 = 0.73 < 0.9): no probe until it is tested. SLO replicas
    # 4 x 0.727 x 1 = 2.91 -> 3; KV 4 x 0.5 / 0.8 = 2.5. The window is clear: down to 3.
    ready = tuple(slo_pod(f"p{i}", NOW, 6_000.0, 1_200.0, FAST_TTFT, FAST_TPOT) for i in range(4))
    state = PolicyState(recommendations=((NOW - 600, 4),), slo=learned(16_500.0, 3_300.0))
    d, new = run(obs(4, ready), state)
    assert (d.desired_replicas, d.reason) == (3, Reason.SCALE_DOWN)
    assert d.values.slo_replicas == pytest.approx(4 * (6_000 / 16_500 + 1_200 / 3_300))
    assert new.slo.capacity_prompt_tokens_per_second == 16_500.0


def test_slo_broken_at_low_load_is_infeasible_not_a_capacity() -> None:
    # 2 pods at 3,000 and 300 tokens/s: u = 0.2 + 0.1 = 0.3, TTFT attainment 0.7: no replica
    # count meets this SLO (long prompts, say): flagged, nothing learned
    ready = tuple(slo_pod(f"p{i}", NOW, 3_000.0, 300.0, SLOW_TTFT, FAST_TPOT) for i in range(2))
    d, state = run(obs(2, ready, free_gpus=8))
    assert (d.values.slo_infeasible_at_low_load, d.values.capacity_learned) == (True, False)
    assert d.values.capacity_prompt_tokens_per_second == 15_000.0
    assert state.slo.capacity_prompt_tokens_per_second is None
    assert d.desired_replicas == 2  # KV 1.25 and SLO 2 x 0.3 x 1.418 = 0.85: 2
    # ...unless the pods queue: the estimate is far too high: Cp shrinks (at most 1 / 1.1)
    queued = tuple(slo_pod(f"p{i}", NOW, 3_000.0, 300.0, SLOW_TTFT, FAST_TPOT, waiting=2.0) for i in range(2))
    d, state = run(obs(2, queued, free_gpus=8))
    assert (d.values.slo_infeasible_at_low_load, d.values.capacity_learned) == (False, True)
    assert state.slo.capacity_prompt_tokens_per_second == pytest.approx(15_000 / 1.1)


@pytest.mark.parametrize(
    "bad",
    [
        hist((1.0, 2.5, INF), (10.0, 10.0, 10.0), NOW - 61),  # stale
        hist((1.0, 2.5, INF), (10.0, math.nan, 10.0), NOW),  # NaN
        hist((1.0, 2.5, INF), (10.0, 5.0, 10.0), NOW),  # a cumulative rate decreasing
    ],
)
def test_unusable_histogram_holds_and_never_scales_down(bad: LatencyHistogram) -> None:
    # 4 pods at 1,000 and 100 tokens/s (SLO replicas 4 x 0.1 x 1 = 0.4), KV 0.1: everything
    # says 1, the window is clear: down to 3 with whole data, held at 4 with one bad histogram
    def fleet(ttft: LatencyHistogram) -> tuple[ReadyPod, ...]:
        return tuple(slo_pod(f"p{i}", NOW, 1_000.0, 100.0, ttft if i == 0 else FAST_TTFT, FAST_TPOT, kv=0.1)
                     for i in range(4))

    state = PolicyState(recommendations=((NOW - 600, 4),), slo=learned(15_000.0, 3_000.0))
    good, _ = run(obs(4, fleet(FAST_TTFT)), state)
    assert (good.desired_replicas, good.reason) == (3, Reason.SCALE_DOWN)
    d, new = run(obs(4, fleet(bad)), state)
    assert (d.desired_replicas, d.reason) == (4, Reason.HOLD_METRICS_UNHEALTHY)
    assert new.slo.capacity_prompt_tokens_per_second == 15_000.0  # nothing learned from it


def test_stale_token_rate_holds() -> None:
    ready = (slo_pod("a", NOW, 1_000.0, 100.0, kv=0.1), slo_pod("b", NOW - 61, 1_000.0, 100.0, kv=0.1))
    ready = (ready[0], ReadyPod("b", ready[0].waiting, ready[0].running, ready[0].kv_cache_usage,
                                prompt_tokens_per_second=MetricSample(1_000.0, NOW - 61),
                                generation_tokens_per_second=MetricSample(100.0, NOW - 61)))
    d, _ = run(obs(4, ready), PolicyState(recommendations=((NOW - 600, 4),)))
    assert (d.desired_replicas, d.reason) == (4, Reason.HOLD_METRICS_UNHEALTHY)


@pytest.mark.parametrize(
    ("o", "bound"),
    [
        (obs(4, pods(4, 0, 4, 0.95, NOW), free_gpus=8), "kv_cache"),
        (obs(2, pods(2, 15, 8, 0.95, NOW), free_gpus=0), "queue"),
        (obs(4, pods(4, 0, 0, 0.0, NOW)), "queue"),  # idle: ties go to the queue (Demand.driver)
        (obs(2, ()), "none"),
    ],
)
def test_without_the_slo_series_decisions_are_as_before(o: Observation, bound: str) -> None:
    d, state = run(o, params=PolicyParams())
    v = d.values
    assert state.slo is COLD_SLO_STATE  # untouched, nothing to persist
    assert (v.slo_replicas, v.headroom_ratio, v.capacity_prompt_tokens_per_second, v.ttft_attainment) == (
        0.0, 1.0, None, None)
    assert v.bound_signal == bound
    assert d.reason is not Reason.SCALE_UP_SLO


def test_token_rates_without_histograms_size_from_the_cold_start() -> None:
    # generic cold start (4,000, 1,500); 2 pods at 4,000 and 750: u = 1 + 0.5 = 1.5, nothing
    # learned (no histogram); SLO replicas 2 x 1.5 x 1.418 = 4.25 -> 5, at most +4 per 15 s
    ready = tuple(slo_pod(f"p{i}", NOW, 4_000.0, 750.0) for i in range(2))
    d, state = run(obs(2, ready, free_gpus=8), params=PolicyParams())
    assert (d.desired_replicas, d.reason, d.values.capacity_learned) == (5, Reason.SCALE_UP_SLO, False)
    assert d.values.ttft_attainment is None
    assert state.slo.cold_start == cold_start_capacity(None, None, None)


# --- properties --------------------------------------------------------------------------------
BOUNDS = ((0.1, 0.5, 1.0, 2.5, INF), (0.05, 0.1, 0.2, INF), (1.0, INF))
ages = st.one_of(st.floats(0, 30), st.floats(61, 600))
rates_or_garbage = st.one_of(st.floats(0, 1e5), st.sampled_from([math.nan, math.inf, -1.0]))


@st.composite
def histograms(draw: st.DrawFn) -> LatencyHistogram | None:
    if draw(st.integers(0, 4)) == 0:
        return None
    bounds = draw(st.sampled_from(BOUNDS))
    steps = draw(st.lists(st.floats(0, 50), min_size=len(bounds), max_size=len(bounds)))
    rates = [sum(steps[: i + 1]) for i in range(len(bounds))]
    if draw(st.integers(0, 5)) == 0:  # garbage: one rate replaced
        rates[draw(st.integers(0, len(rates) - 1))] = draw(rates_or_garbage)
    return LatencyHistogram(bounds, tuple(rates), NOW - draw(ages))


@st.composite
def rate(draw: st.DrawFn) -> MetricSample | None:
    if draw(st.integers(0, 5)) == 0:
        return None
    return MetricSample(draw(rates_or_garbage), NOW - draw(ages))


@st.composite
def with_slo(draw: st.DrawFn, o: Observation) -> Observation:
    ready = tuple(
        ReadyPod(p.name, p.waiting, p.running, p.kv_cache_usage, p.startup, p.completed_per_second,
                 draw(rate()), draw(rate()), draw(histograms()), draw(histograms()))
        for p in o.ready_pods
    )
    return Observation(o.spec_replicas, ready, o.pods_in_flight, o.free_gpus, o.rollout_in_progress)


@st.composite
def slo_states(draw: st.DrawFn) -> SloState:
    if draw(st.booleans()):
        return SloState()
    cold = draw(st.sampled_from([(4_000.0, 1_500.0), (15_000.0, 3_000.0)]))
    cp, cg = draw(st.floats(cold[0] / 20, cold[0] * 20)), draw(st.floats(cold[1] / 20, cold[1] * 20))
    return SloState(cold, cp, cg, ((NOW - draw(st.floats(0, 900)), draw(st.floats(0.01, 100))),),
                    draw(st.floats(-1, 1)), draw(st.floats(0, 1)), draw(st.integers(0, 100)), NOW - 900)


def _unusable(x: MetricSample | LatencyHistogram | None) -> bool:
    return x is not None and x.health(NOW, 60.0) is not SampleHealth.FRESH


def _step1_unhealthy(p: ReadyPod) -> bool:
    return any(s is None or s.health(NOW, 60.0) is not SampleHealth.FRESH for s in (p.waiting, p.running, p.kv_cache_usage))


def _slo_partial(ready: tuple[ReadyPod, ...]) -> bool:
    """Independently of the code: some SLO series present, and some pod's rates missing or
    unusable, or some histogram unusable."""
    series = [(p.prompt_tokens_per_second, p.generation_tokens_per_second, p.ttft, p.tpot) for p in ready]
    if all(x is None for s in series for x in s):
        return False
    return any(p is None or g is None or _unusable(p) or _unusable(g) or _unusable(t) or _unusable(q)
               for p, g, t, q in series)


@settings(max_examples=200, deadline=None)
@given(params(), st.data(), states(), slo_states())
def test_slo_signal_never_lowers_replicas_on_unhealthy_data(p: PolicyParams, data: st.DataObject,
                                                            s: PolicyState, slo: SloState) -> None:
    o = data.draw(with_slo(data.draw(observations())))
    state = PolicyState(s.recommendations, s.scale_up_events, s.scale_down_events, s.load_history, slo=slo)
    d, _ = decide(p, o, state, NOW)
    if (not o.ready_pods or any(map(_step1_unhealthy, o.ready_pods)) or _slo_partial(o.ready_pods)) and \
            o.spec_replicas <= bounds(p)[1]:
        assert d.desired_replicas >= o.spec_replicas, d
    lower, upper, _ = bounds(p)
    assert lower <= d.desired_replicas <= upper


@settings(max_examples=200, deadline=None)
@given(params(), st.data(), states(), slo_states())
def test_capacity_stays_within_bounds_and_state_round_trips(p: PolicyParams, data: st.DataObject,
                                                            s: PolicyState, slo: SloState) -> None:
    o = data.draw(with_slo(data.draw(observations(healthy=True))))
    d, new = decide(p, o, PolicyState(s.recommendations, load_history=s.load_history, slo=slo), NOW)
    v = d.values
    if v.capacity_prompt_tokens_per_second is not None and new.slo.cold_start is not None:
        cold = new.slo.cold_start
        assert cold[0] / MAX_DRIFT_RATIO <= v.capacity_prompt_tokens_per_second <= cold[0] * MAX_DRIFT_RATIO
        assert cold[1] / MAX_DRIFT_RATIO <= v.capacity_generation_tokens_per_second <= cold[1] * MAX_DRIFT_RATIO
        assert 1.0 <= v.headroom_ratio <= p.headroom_max_ratio
        assert math.isfinite(v.slo_replicas) and v.slo_replicas >= 0
    for a in (v.ttft_attainment, v.tpot_attainment):
        assert a is None or 0.0 <= a <= 1.0 + 1e-9
    assert SloState.from_dict(new.slo.to_dict()) == new.slo


def test_length_aware_ttft_bound() -> None:
    # 0.5 s per 1k prompt tokens: each pod 9,000 prompt tokens/s over 10 first tokens/s = 900
    # tokens a request: bound 2 + 0.45 = 2.45 s; within it 5 + 3 x 1.45 / 1.5 = 7.9 of 10
    p = PolicyParams(capacity_profile="llama-3-8b/h100",
                     slo={"ttft_seconds": 2.0, "ttft_seconds_per_1k_prompt_tokens": 0.5})
    ready = tuple(slo_pod(f"p{i}", NOW, 9_000.0, 900.0, SLOW_TTFT, FAST_TPOT) for i in range(2))
    d, _ = run(obs(2, ready, free_gpus=8), params=p)
    assert d.values.slo_ttft_seconds == pytest.approx(2.45)
    assert d.values.ttft_attainment == pytest.approx(0.79)


def test_the_cold_floor_waits_while_the_latency_has_slack() -> None:
    # A fleet moved over from a static one, larger than it needs: 2 pods at 18,000 prompt and
    # 2,400 generated tokens/s, u = 1.2 + 0.8 = 2 on the cold start (15,000, 3,000), every TTFT
    # within 1 s and TPOT within 50 ms (half the bounds): met with slack, so the estimate jumps to
    # the load (u = 1) and the cold floor waits: headroom 1, SLO replicas 2 x 1 = 2, a hold.
    ready = tuple(slo_pod(f"p{i}", NOW, 18_000.0, 2_400.0, FAST_TTFT, FAST_TPOT) for i in range(2))
    d, _ = run(obs(2, ready, free_gpus=8))
    assert d.values.slo_slack is True
    assert d.values.headroom_ratio == pytest.approx(1.0)
    assert d.values.slo_replicas == pytest.approx(2.0)
    assert d.desired_replicas == 2
    # Met, but without slack (TTFT: 9.95 of 10 requests within 2 s, 9.7 within 1 s; the
    # target share within half the 2 s bound is not reached): the fleet may be at its limit, so
    # the floor applies: 2 x 1 x 1.418 = 2.84 -> 3 (scale_up_slo).
    tight = hist((1.0, 2.0, INF), (9.7, 9.95, 10.0), NOW)
    ready = tuple(slo_pod(f"p{i}", NOW, 18_000.0, 2_400.0, tight, FAST_TPOT) for i in range(2))
    d, _ = run(obs(2, ready, free_gpus=8))
    assert d.values.slo_slack is False
    assert d.values.headroom_ratio == pytest.approx(COLD_HEADROOM)
    assert (d.desired_replicas, d.reason) == (3, Reason.SCALE_UP_SLO)


def test_no_scale_down_while_the_slo_is_broken() -> None:
    # 2 pods at 30,000 prompt and 600 generated tokens/s, TTFT attainment 0.7: u = 2 + 0.2 = 2.2
    # > 1.1, so the estimate moves to the load / 1.1 and the SLO step asks 2 x 1.1 = 2.2 -> 3
    # (a smooth history: headroom 1).
    # 6 replicas (4 loading), the window's last 6 long gone: the 3 would be a scale-down while the
    # SLO is broken; held at 6 (hold_slo_broken).
    ready = tuple(slo_pod(f"p{i}", NOW, 30_000.0, 600.0, SLOW_TTFT, FAST_TPOT) for i in range(2))
    loading = tuple(flying(f"f{i}", PodStage.LOADING, NOW - 60, NOW - 50) for i in range(4))
    d, _ = run(obs(6, ready, pods_in_flight=loading, free_gpus=8), PolicyState(recommendations=((NOW - 900, 6),), slo=SMOOTH))
    assert (d.desired_replicas, d.reason) == (6, Reason.HOLD_SLO_BROKEN)
    assert d.values.slo_replicas == pytest.approx(2.2)
    # the same with the SLO met: not this hold (the jump to the load asks 2, within tolerance of
    # the 2 ready: hold_within_tolerance)
    fast = tuple(slo_pod(f"p{i}", NOW, 30_000.0, 600.0, FAST_TTFT, FAST_TPOT) for i in range(2))
    d, _ = run(obs(6, fast, pods_in_flight=loading, free_gpus=8), PolicyState(recommendations=((NOW - 900, 6),), slo=SMOOTH))
    assert d.reason is Reason.HOLD_WITHIN_TOLERANCE


def test_the_tolerance_does_not_hold_a_scale_up_while_the_slo_is_broken() -> None:
    # 10 pods at 12,000 prompt and 720 generated tokens/s: u = 0.8 + 0.24 = 1.04 on the cold
    # start (15,000, 3,000). TTFT attainment 0.7: broken at 1 <= u <= 1.1, so nothing is learned
    # (more replicas are expected). SLO replicas 10 x 1.04 = 10.4 (a smooth history: headroom 1): within the 10 % tolerance of
    # the 10 ready, which held at 10 every tick (a tuning slice sat 1 h 50 min at 9 that way);
    # with the SLO measured broken the tolerance does not hold: 11 (scale_up_slo).
    p = PolicyParams(capacity_profile="llama-3-8b/h100", max_replicas=20)
    ready = tuple(slo_pod(f"p{i}", NOW, 12_000.0, 720.0, SLOW_TTFT, FAST_TPOT) for i in range(10))
    d, _ = run(obs(10, ready, free_gpus=8), PolicyState(slo=SMOOTH), params=p)
    assert d.values.slo_replicas == pytest.approx(10.4)
    assert (d.desired_replicas, d.reason) == (11, Reason.SCALE_UP_SLO)
    # the same load with the SLO met: carried above the estimate, so the estimate grows to the
    # load (u = 1), SLO replicas 10: within the tolerance, held
    fast = tuple(slo_pod(f"p{i}", NOW, 12_000.0, 720.0, FAST_TTFT, FAST_TPOT) for i in range(10))
    d, _ = run(obs(10, fast, free_gpus=8), PolicyState(slo=SMOOTH), params=p)
    assert d.values.slo_replicas == pytest.approx(10.0)
    assert (d.desired_replicas, d.reason) == (10, Reason.HOLD_WITHIN_TOLERANCE)
