"""The decision core's promises under what a review's fuzzing found (each test failed before):
a malformed persisted state is a ValueError and nothing else; a state the reader accepts, and
any finite token rate, never make `decide()` raise; the state `decide()` writes reads back; a
missing throughput series never scales down later on healthy data; a clock stepped back never
blocks scale-ups for the length of the step."""

from __future__ import annotations

import json
import math
from typing import Any

import pytest

from autoscaler.controller.state import from_record, to_record
from autoscaler.policy import LeadTimeState, PolicyParams, PolicyState, decide
from autoscaler.policy.headroom import log_growth
from autoscaler.policy.types import SloState

from .builders import hist, obs, pod, pods, slo_pod

T = 1_000_000.0
INF = math.inf
H100 = PolicyParams(capacity_profile="llama-3-8b/h100")


def slo_fleet(now: float, prompt: float, generation: float, n: int = 2) -> tuple[Any, ...]:
    ttft = hist((1.0, 2.5, INF), (10.0, 10.0, 10.0), now)
    tpot = hist((0.05, 0.1, INF), (10.0, 10.0, 10.0), now)
    return tuple(slo_pod(f"p{i}", now, prompt, generation, ttft, tpot) for i in range(n))


@pytest.mark.parametrize(("cls", "data"), [
    (LeadTimeState, {"version": 1, "model_load_samples": 5}),  # TypeError before
    (LeadTimeState, {"version": 1, "model_load_samples": [[1.0]]}),  # IndexError
    (LeadTimeState, {"version": 1, "model_load_samples": [{"a": 1}]}),  # KeyError
    (LeadTimeState, {"version": 1, "model_load_samples": [[None, 1]]}),  # TypeError
    (LeadTimeState, {"version": 1, "recorded_pods": None}),  # TypeError
    (LeadTimeState, {"version": 1, "model_load_samples": [[10**400, 1]]}),  # OverflowError
    (SloState, {"version": 1, "demand_history": None}),  # TypeError
    (SloState, {"version": 1, "growth_mean": 10**400}),  # OverflowError
    (SloState, {"version": 1, "growth_mean": 800.0}),  # accepted before, then decide() overflowed
    (SloState, {"version": 1, "growth_variance": 1e6}),
])
def test_a_malformed_state_is_a_value_error(cls: Any, data: dict[str, Any]) -> None:
    with pytest.raises(ValueError):
        cls.from_dict(data)


def test_a_record_with_a_number_too_large_for_a_float_is_a_value_error() -> None:
    """OverflowError escaped the controller's catch: one bad entry stopped every target."""
    with pytest.raises(ValueError):
        from_record(json.loads('{"version": 3, "lead": {"version": 1}, "slo": {"version": 1, "growth_mean": 1'
                               + "0" * 400 + "}}"))
    with pytest.raises(ValueError):
        from_record({"version": 2, "lead": {"version": 1}, "scale_up_events": [[10**400, 1]], "scale_down_events": []})


def test_extreme_but_finite_token_rates_never_make_decide_raise_and_the_state_reads_back() -> None:
    p = PolicyParams(capacity_profile="llama-3-8b/h100", max_replicas=10)
    for rates in ((1e-150, 1e150, 1e-150), (1e-300, 1e300, 1e3)):
        state, now = PolicyState(), T
        for rate in rates:  # one lead time (300 s) apart: growth samples of +-340 and beyond
            _, state = decide(p, obs(2, slo_fleet(now, rate, rate), free_gpus=10**9), state, now)
            now += 300.0
        assert state.slo is not None and SloState.from_dict(state.slo.to_dict()) == state.slo
        from_record(json.loads(json.dumps(to_record(state))))


def test_log_growth_docstring() -> None:
    assert log_growth(3.0, 2.0) == pytest.approx(math.log(1.5))
    assert log_growth(1e300, 1e-300) == 100.0 and log_growth(1e-300, 1e300) == -100.0


def test_two_ticks_at_one_instant_keep_the_demand_history_in_order() -> None:
    """A lead time of 0 (a valid config): two ticks at the same `now` recorded two readings at
    one time, which the reader refused ("out of time order")."""
    p = PolicyParams(capacity_profile="llama-3-8b/h100", model_load_seconds_default=0, node_provision_seconds_default=0)
    o = obs(2, slo_fleet(T, 3000.0, 750.0))
    _, s = decide(p, o, PolicyState(), T)
    _, s = decide(p, o, s, T)
    assert s.slo is not None and SloState.from_dict(s.slo.to_dict()) == s.slo


def test_a_throughput_series_lost_for_a_while_never_scales_down_later() -> None:
    """3 of 10 pods lose `completed_per_second` for 10 minutes: their readings, read as 0,
    stayed in the forecast window and scaled down 10 minutes after the data came back, on
    healthy data (forecast window 1200 s)."""
    p = PolicyParams(forecast_window_seconds=1200)

    def run(outage: range) -> list[tuple[int, int, int]]:
        state = PolicyState(load_history=((T - 15, 130.0),), throughput_history=((T - 15, 10.0),))
        out = []
        for k in range(120):
            now = T + 15 * k
            missing = {0, 1, 2} if k in outage else set()
            ready = tuple(pod(f"p{i}", 5.0, 8.0, 0.5, now, done=None if i in missing else 1.0) for i in range(10))
            d, state = decide(p, obs(10, ready, free_gpus=100), state, now)
            out.append((k, d.current_replicas, d.desired_replicas))
        return out

    assert all(d == c for _, c, d in run(range(0)))
    assert not [x for x in run(range(20, 60)) if x[2] < x[1]]


def test_a_clock_stepped_back_does_not_block_scale_ups_for_the_step() -> None:
    """One tick with the host clock an hour ahead (4 -> 8, the event stamped then); the clock
    corrected, the queue asks for 16: the scale-up rate limit read the future event as inside
    its period for the whole hour. It counts from now: one period, then up."""
    p = PolicyParams(max_replicas=50, scale_up_max_percent=0, scale_up_max_pods=4)
    d, s = decide(p, obs(4, pods(4, 15, 8, 0.95, T + 3600)), PolicyState(), T + 3600)
    assert d.desired_replicas == 8
    spec = 8
    for k in range(1, 9):
        now = T + 15 * k
        d, s = decide(p, obs(spec, pods(spec, 30, 8, 0.99, now)), s, now)
        spec = d.desired_replicas
    assert spec > 8, d
