"""Properties of decide() over random observations and histories (hypothesis)."""

from __future__ import annotations

import math

from hypothesis import given, settings
from hypothesis import strategies as st

from autoscaler.policy import (
    MetricSample,
    Observation,
    PodInFlight,
    PodStage,
    PodStartup,
    PolicyParams,
    PolicyState,
    ReadyPod,
    decide,
)
from autoscaler.policy.limits import bounds

NOW = 1_000_000.0

values = st.one_of(
    st.floats(min_value=0, max_value=500, allow_nan=False),
    st.sampled_from([float("nan"), float("inf"), -1.0, 0.0]),
)
ages = st.one_of(st.floats(min_value=0, max_value=30), st.floats(min_value=61, max_value=600))


@st.composite
def samples(draw: st.DrawFn) -> MetricSample | None:
    if draw(st.integers(0, 9)) == 0:
        return None
    return MetricSample(draw(values), NOW - draw(ages))


@st.composite
def ready_pods(draw: st.DrawFn, healthy: bool | None = None) -> ReadyPod:
    name = f"r{draw(st.integers(0, 10**6))}"
    if healthy:
        fresh = st.floats(min_value=0, max_value=500, allow_nan=False)
        return ReadyPod(
            name,
            MetricSample(draw(fresh), NOW),
            MetricSample(draw(fresh), NOW),
            MetricSample(draw(st.floats(0, 1)), NOW),
            completed_per_second=MetricSample(draw(st.floats(0, 20)), NOW) if draw(st.booleans()) else None,
        )
    return ReadyPod(name, draw(samples()), draw(samples()), draw(samples()), completed_per_second=draw(samples()))


@st.composite
def in_flight(draw: st.DrawFn) -> PodInFlight:
    stage = draw(st.sampled_from(list(PodStage)))
    created = NOW - draw(st.floats(0, 3000))
    scheduled = None if stage is PodStage.UNSCHEDULABLE else created + draw(st.floats(0, 100))
    return PodInFlight(f"f{draw(st.integers(0, 10**6))}", stage, PodStartup(created, scheduled))


@st.composite
def params(draw: st.DrawFn) -> PolicyParams:
    lo = draw(st.integers(1, 5))
    return PolicyParams(
        min_replicas=lo,
        max_replicas=draw(st.integers(lo, 40)),
        scale_down_max_pods=draw(st.integers(1, 3)),
        forecast_max_growth_ratio=draw(st.floats(1, 3)),
    )


@st.composite
def states(draw: st.DrawFn) -> PolicyState:
    recs = tuple(
        (NOW - draw(st.floats(0, 1200)), draw(st.integers(0, 40))) for _ in range(draw(st.integers(0, 5)))
    )
    loads = tuple(sorted((NOW - draw(st.floats(1, 200)), draw(st.floats(0, 2000))) for _ in range(draw(st.integers(0, 6)))))
    downs = tuple((NOW - draw(st.floats(0, 300)), draw(st.integers(1, 3))) for _ in range(draw(st.integers(0, 2))))
    return PolicyState(recommendations=recs, load_history=loads, scale_down_events=downs)


@st.composite
def observations(draw: st.DrawFn, healthy: bool | None = None) -> Observation:
    return Observation(
        spec_replicas=draw(st.integers(0, 50)),
        ready_pods=tuple(draw(st.lists(ready_pods(healthy), max_size=12))),
        pods_in_flight=tuple(draw(st.lists(in_flight(), max_size=6))),
        free_gpus=draw(st.one_of(st.none(), st.integers(0, 16))),
        rollout_in_progress=draw(st.booleans()),
    )


@settings(max_examples=150, deadline=None)
@given(params(), observations(), states())
def test_desired_within_bounds(p: PolicyParams, o: Observation, s: PolicyState) -> None:
    d, _ = decide(p, o, s, NOW)
    lower, upper, _ = bounds(p)
    assert lower <= d.desired_replicas <= upper


def _unhealthy(pod: ReadyPod) -> bool:
    for sample in (pod.waiting, pod.running, pod.kv_cache_usage):
        if sample is None or not math.isfinite(sample.value) or sample.value < 0 or NOW - sample.timestamp > 60:
            return True
    return False


@settings(max_examples=150, deadline=None)
@given(params(), observations(), states())
def test_no_scale_down_on_unhealthy_data(p: PolicyParams, o: Observation, s: PolicyState) -> None:
    d, _ = decide(p, o, s, NOW)
    if (not o.ready_pods or any(_unhealthy(x) for x in o.ready_pods)) and o.spec_replicas <= bounds(p)[1]:
        assert d.desired_replicas >= o.spec_replicas, d


@settings(max_examples=150, deadline=None)
@given(params(), observations(), states())
def test_scale_down_step_never_exceeded(p: PolicyParams, o: Observation, s: PolicyState) -> None:
    d, new_state = decide(p, o, s, NOW)
    if o.spec_replicas <= bounds(p)[1]:  # above max, the bound wins at once
        removed = sum(n for t, n in new_state.scale_down_events if NOW - t < p.scale_down_period_seconds)
        assert removed <= p.scale_down_max_pods or d.desired_replicas >= o.spec_replicas


@settings(max_examples=200, deadline=None)
@given(params(), observations(healthy=True), states())
def test_in_flight_pods_counted_once(p: PolicyParams, o: Observation, s: PolicyState) -> None:
    d, _ = decide(p, o, s, NOW)
    assert d.values.pods_in_flight <= (0 if o.rollout_in_progress else len(o.pods_in_flight))
    assert sum(d.values.pods_in_flight_by_stage.values()) == (0 if o.rollout_in_progress else len(o.pods_in_flight))


@settings(max_examples=200, deadline=None)
@given(params(), observations(), states())
def test_decide_is_deterministic(p: PolicyParams, o: Observation, s: PolicyState) -> None:
    assert decide(p, o, s, NOW) == decide(p, o, s, NOW)


@settings(max_examples=100, deadline=None)
@given(params(), st.lists(observations(healthy=True), min_size=2, max_size=8))
def test_scale_downs_respect_the_period_over_a_run(p: PolicyParams, run: list[Observation]) -> None:
    """Closed loop over consecutive ticks (each tick's spec is the last decision): never more
    than scale_down_max_pods removed inside one scale-down period, and the state stays bounded."""
    state = PolicyState()
    downs: list[tuple[float, int]] = []
    spec = min(run[0].spec_replicas, bounds(p)[1])
    for i, o in enumerate(run):
        now = NOW + 15 * i
        o2 = Observation(spec_replicas=spec, ready_pods=o.ready_pods,
                         pods_in_flight=o.pods_in_flight, free_gpus=o.free_gpus,
                         rollout_in_progress=o.rollout_in_progress)
        d, state = decide(p, o2, state, now)
        if d.desired_replicas < o2.spec_replicas:
            downs.append((now, o2.spec_replicas - d.desired_replicas))
        spec = d.desired_replicas
        in_period = sum(n for t, n in downs if now - t < p.scale_down_period_seconds)
        assert in_period <= p.scale_down_max_pods
    assert len(state.recommendations) <= len(run) + 1
