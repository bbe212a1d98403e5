"""Fuzzing decide() beyond tests/policy/test_properties.py (which draws well-behaved
observations at one fixed instant): hostile values and timestamps, odd pod lifecycles and
counts, long runs with churning pods and a clock that jumps. decide() never raises, the
decision stays within the bounds, and the state it carries stays bounded however long it
runs (it is kept in memory per target, and its lead-time part in a ConfigMap)."""

from __future__ import annotations

import dataclasses
import math
import random

from hypothesis import Phase, given, settings
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
    Reason,
    decide,
)
from autoscaler.policy.lead_time import MAX_REMEMBERED_PODS
from autoscaler.policy.limits import bounds

NOW = 1_700_000_000.0

weird_values = st.one_of(
    st.floats(allow_nan=True, allow_infinity=True),
    st.sampled_from([0.0, -0.0, 1e-300, 1e300, 1.7976931348623157e308, -1.0, float("nan"), float("inf")]),
    st.floats(0, 1000),
)
# what PrometheusSource can hand over: finite timestamps, but from anywhere in time
weird_times = st.one_of(
    st.floats(min_value=-1e12, max_value=1e12),
    st.sampled_from([0.0, NOW, NOW + 1e9, NOW - 1e9, NOW + 0.001]),
    st.floats(NOW - 120, NOW + 5),
)


@st.composite
def weird_samples(draw: st.DrawFn) -> MetricSample | None:
    if draw(st.integers(0, 6)) == 0:
        return None
    return MetricSample(draw(weird_values), draw(weird_times))


@st.composite
def weird_startups(draw: st.DrawFn) -> PodStartup | None:
    if draw(st.booleans()):
        return None
    created = draw(weird_times)
    return PodStartup(created, draw(st.one_of(st.none(), weird_times)), draw(st.one_of(st.none(), weird_times)))


names = st.one_of(st.sampled_from(["p", "p", "q", ""]), st.text(max_size=12))


@st.composite
def weird_observations(draw: st.DrawFn) -> Observation:
    ready = [
        ReadyPod(draw(names), draw(weird_samples()), draw(weird_samples()), draw(weird_samples()),
                 startup=draw(weird_startups()), completed_per_second=draw(weird_samples()))
        for _ in range(draw(st.integers(0, 8)))
    ]
    flight = []
    for _ in range(draw(st.integers(0, 5))):
        startup = draw(weird_startups()) or PodStartup(draw(weird_times))
        flight.append(PodInFlight(draw(names), draw(st.sampled_from(list(PodStage))), startup))
    return Observation(
        spec_replicas=draw(st.one_of(st.integers(0, 60), st.sampled_from([0, 10_000, 10**9]))),
        ready_pods=tuple(ready),
        pods_in_flight=tuple(flight),
        free_gpus=draw(st.one_of(st.none(), st.integers(0, 64), st.just(10**9))),
        rollout_in_progress=draw(st.booleans()),
    )


@st.composite
def policies(draw: st.DrawFn) -> PolicyParams:
    lo = draw(st.integers(1, 10))
    gpus = draw(st.integers(1, 8))
    return PolicyParams(
        min_replicas=lo,
        max_replicas=draw(st.integers(lo, 10_000)),
        gpus_per_replica=gpus,
        max_gpus=draw(st.one_of(st.none(), st.integers(gpus * lo, 100_000))),
        scale_down_max_pods=draw(st.integers(1, 10)),
        scale_up_max_pods=draw(st.integers(0, 20)),
        target_running_per_replica=draw(st.one_of(st.none(), st.floats(1, 512))),
    )


def _check(policy: PolicyParams, observation: Observation, decision: object) -> None:
    from autoscaler.policy import Decision

    assert isinstance(decision, Decision)
    lower, upper, _ = bounds(policy)
    assert type(decision.desired_replicas) is int
    assert lower <= decision.desired_replicas <= upper, decision
    assert decision.current_replicas == observation.spec_replicas
    assert isinstance(decision.reason, Reason)


@settings(max_examples=400, deadline=None)
@given(policy=policies(), observation=weird_observations(), now=weird_times)
def test_decide_never_raises_and_stays_within_bounds(policy: PolicyParams, observation: Observation, now: float) -> None:
    decision, state = decide(policy, observation, PolicyState(), now)
    _check(policy, observation, decision)
    # and again from the state it produced (the second tick reads histories)
    decision2, _ = decide(policy, observation, state, now + 15)
    _check(policy, observation, decision2)


def _state_sizes(state: PolicyState) -> dict[str, int]:
    sizes = {f.name: len(getattr(state, f.name)) for f in dataclasses.fields(state)
             if isinstance(getattr(state, f.name), tuple)}
    sizes.update({f"lead.{f.name}": len(getattr(state.lead, f.name)) for f in dataclasses.fields(state.lead)})
    return sizes


@st.composite
def fleet_tick(draw: st.DrawFn, tick: int) -> Observation:
    """A churning fleet: pods come and go with new names every few ticks, some load, some wait."""
    gen = tick // draw(st.integers(1, 4))
    now = NOW + 15 * tick
    ready = []
    for i in range(draw(st.integers(0, 6))):
        fresh = draw(st.booleans()) or draw(st.booleans())
        ts = now if fresh else now - draw(st.floats(61, 10_000))
        ready.append(ReadyPod(
            f"r{gen}-{i}",
            MetricSample(draw(st.floats(0, 200)), ts), MetricSample(draw(st.floats(0, 64)), ts),
            MetricSample(draw(st.floats(0, 1)), ts),
            startup=PodStartup(now - 900, now - 890, now - draw(st.floats(0, 600))),
            completed_per_second=MetricSample(draw(st.floats(0, 5)), ts) if draw(st.booleans()) else None,
        ))
    flight = [PodInFlight(f"f{gen}-{i}", draw(st.sampled_from(list(PodStage))),
                          PodStartup(now - draw(st.floats(0, 900)), now - 5 if draw(st.booleans()) else None))
              for i in range(draw(st.integers(0, 3)))]
    return Observation(spec_replicas=draw(st.integers(1, 20)), ready_pods=tuple(ready), pods_in_flight=tuple(flight),
                       free_gpus=draw(st.one_of(st.none(), st.integers(0, 8))),
                       rollout_in_progress=draw(st.integers(0, 9)) == 0)


# no shrinking: a failing 1,000-tick run takes minutes to shrink; the assertion names the list
@settings(max_examples=8, deadline=None, phases=[Phase.explicit, Phase.reuse, Phase.generate])
@given(data=st.data(), policy=policies(), seed=st.integers(0, 2**32))
def test_state_stays_bounded_over_a_long_run_with_a_jumping_clock(
    data: st.DataObject, policy: PolicyParams, seed: int
) -> None:
    """1,000 ticks (4 h at 15 s) of a churning fleet; the clock sometimes steps back (NTP)
    or jumps ahead. Every history is trimmed to its window and the learned samples and
    remembered pod names to their caps, so no list grows with the run length."""
    pool = [data.draw(fleet_tick(t)) for t in range(40)]
    rng = random.Random(seed)
    steps = [15.0] * 30 + [-300.0, -3600.0, 3600.0, 0.0, 0.5]  # drawn once, replayed with moving clocks
    state = PolicyState()
    now = NOW
    spec = 1
    largest: dict[str, int] = {}
    for tick in range(1000):
        now += rng.choice(steps)
        base = pool[tick % len(pool)]
        shift = now - (NOW + 15 * (tick % len(pool)))
        observation = _shifted(base, shift, spec, tick)
        decision, state = decide(policy, observation, state, now)
        _check(policy, observation, decision)
        spec = max(1, min(decision.desired_replicas, 60))
        for key, size in _state_sizes(state).items():
            largest[key] = max(largest.get(key, 0), size)
    # windows of at most 600 s at 15 s make ~40 entries; a clock step back keeps some more
    for key, size in largest.items():
        if key.endswith("_samples"):
            limit = policy.lead_time_max_samples
        elif key.startswith("lead."):  # remembered pod names
            limit = MAX_REMEMBERED_PODS
        else:
            limit = 400
        assert size <= limit, (key, size, largest)


def _shifted(o: Observation, shift: float, spec: int, tick: int) -> Observation:
    """`o` moved in time by `shift` seconds, pods renamed per tick (new pods keep coming)."""

    def s(sample: MetricSample | None) -> MetricSample | None:
        return None if sample is None else MetricSample(sample.value, sample.timestamp + shift)

    def st_(startup: PodStartup | None) -> PodStartup | None:
        if startup is None:
            return None
        return PodStartup(startup.created_at + shift,
                          None if startup.scheduled_at is None else startup.scheduled_at + shift,
                          None if startup.ready_at is None else startup.ready_at + shift)

    ready = tuple(ReadyPod(f"{p.name}-{tick // 3}", s(p.waiting), s(p.running), s(p.kv_cache_usage), st_(p.startup),
                           s(p.completed_per_second)) for p in o.ready_pods)
    flight = tuple(PodInFlight(f"{p.name}-{tick // 3}", p.stage, st_(p.startup) or p.startup) for p in o.pods_in_flight)
    assert all(math.isfinite(p.startup.created_at) for p in flight)
    return Observation(spec, ready, flight, o.free_gpus, o.rollout_in_progress)
