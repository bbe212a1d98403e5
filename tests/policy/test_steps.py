"""Table tests for each policy step. Each docstring's worked example is a row here."""

from __future__ import annotations

import dataclasses

import pytest

from autoscaler.policy import Clamp, LeadTimeState, MetricSample, PodStage, PodStartup, PolicyParams, SampleHealth
from autoscaler.policy.demand import (
    Demand,
    _gauges,
    arrival_rate,
    mean_throughput,
    batch_queue_replicas,
    batch_replicas,
    compute_demand,
    fleet_throughput,
    kv_replicas,
    rate_queue_replicas,
    throughput_partial,
    whole_replicas,
)
from autoscaler.policy.forecast import Forecast, forecast, trend, update_load_history
from autoscaler.policy.health import assess_health, is_warming, pod_health, sample_health
from autoscaler.policy.in_flight import assess_in_flight, cap_for_in_flight, plan_after, pod_eta
from autoscaler.policy.lead_time import (
    LeadTimeEstimate,
    estimate_lead_time,
    learn_lead_times,
    node_needed,
    percentile,
)
from autoscaler.policy.limits import (
    Limited,
    apply_limits,
    bounds,
    record_event,
    scale_down_limit,
    scale_up_limit,
)
from autoscaler.policy.outcome import clamp, reason
from autoscaler.policy.recommendation import (
    Recommendation,
    hold_on_partial_data,
    recommend,
    wait_for_capacity_in_flight,
)
from autoscaler.policy.rollout import counted_in_flight, hold_for_rollout
from autoscaler.policy.sizing import Sizing, read_demand, size
from autoscaler.policy.stabilize import stabilize
from autoscaler.policy.slo_capacity import SloSignal
from autoscaler.policy.types import Observation, PolicyState, Reason, SloState

from .builders import flying, obs, pod, pods

P = PolicyParams()


# --- step 1: metric health -------------------------------------------------------------------
@pytest.mark.parametrize(
    ("sample", "expected"),
    [
        (MetricSample(1.0, 940.0), SampleHealth.FRESH),  # docstring: 60 s old, at the edge: fresh
        (MetricSample(1.0, 939.0), SampleHealth.STALE),  # docstring: 61 s old: stale
        (MetricSample(float("nan"), 1000.0), SampleHealth.NAN),  # NaN whatever its age
        (MetricSample(float("inf"), 1000.0), SampleHealth.NAN),
        (MetricSample(-1.0, 1000.0), SampleHealth.NAN),  # a negative gauge is garbage, not zero
        (None, SampleHealth.ABSENT),
        (MetricSample(0.0, 1000.0), SampleHealth.FRESH),  # a real zero is fresh
    ],
)
def test_sample_health(sample: MetricSample | None, expected: SampleHealth) -> None:
    assert sample_health(sample, now=1000.0, stale_after_seconds=60.0) is expected


@pytest.mark.parametrize(
    ("waiting", "running", "kv", "expected"),
    [
        (1.0, 1.0, 0.5, SampleHealth.FRESH),
        (None, 1.0, float("nan"), SampleHealth.NAN),  # NaN is worse than absent
        (None, 1.0, 0.5, SampleHealth.ABSENT),
        (1.0, 1.0, None, SampleHealth.ABSENT),
    ],
)
def test_pod_health_worst_sample(
    waiting: float | None, running: float | None, kv: float | None, expected: SampleHealth
) -> None:
    assert pod_health(pod("a", waiting, running, kv, at=1000.0), 1000.0, 60.0) is expected


def test_assess_health_splits_pods() -> None:
    report = assess_health((pod("a", 1, 1, 0.5, 1000.0), pod("b", 1, 1, 0.5, 900.0)), 1000.0, 60.0)
    assert [p.name for p in report.healthy] == ["a"]
    assert report.unhealthy == {"b": SampleHealth.STALE}
    assert not report.all_healthy


@pytest.mark.parametrize(
    ("ready_at", "samples", "expected"),
    [
        (950.0, (None, None, None), True),  # docstring: ready 50 s ago, not scraped yet
        (930.0, (None, None, None), False),  # docstring: 70 s > 60 s: a missing series is a fault
        (950.0, (None, 3.0, None), False),  # docstring: scraped, one series missing: a fault
        (None, (None, None, None), False),  # docstring: no ready time known
        (940.0, (None, None, None), True),  # 60 s: at the edge, still warming
        (1010.0, (None, None, None), False),  # ready "in the future" (clock skew): not trusted
    ],
)
def test_is_warming(ready_at: float | None, samples: tuple[float | None, ...], expected: bool) -> None:
    startup = None if ready_at is None else PodStartup(created_at=800.0, scheduled_at=810.0, ready_at=ready_at)
    assert is_warming(pod("a", *samples, at=1000.0, startup=startup), 1000.0, 60.0) is expected


def test_assess_health_names_warming_pods_and_keeps_them_unhealthy() -> None:
    young = PodStartup(created_at=800.0, scheduled_at=810.0, ready_at=990.0)
    old = PodStartup(created_at=100.0, scheduled_at=110.0, ready_at=200.0)
    report = assess_health(
        (pod("a", 1, 1, 0.5, 1000.0), pod("new", None, None, None, 1000.0, startup=young),
         pod("lost", None, None, None, 1000.0, startup=old)),
        1000.0, 60.0,
    )
    assert report.warming == ("new",)
    assert report.unhealthy == {"new": SampleHealth.ABSENT, "lost": SampleHealth.ABSENT}
    assert not report.all_healthy  # warming pods still forbid any scale-down


# --- step 2: demand ---------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("waiting", "running", "batch", "target", "expected"),
    [
        (30, 16, 8, 3, 46 / 11),  # docstring: (30 + 16) / (8 + 3) = 4.18
        (6, 16, 8, 3, 2.0),  # exactly at target: 3 waiting each -> 2 replicas
        (10, 4, 2, 3, 14 / 5),  # KV-bound small batches: 14 / 5 = 2.8
    ],
)
def test_batch_queue_replicas(waiting: float, running: float, batch: float, target: float, expected: float) -> None:
    assert batch_queue_replicas(waiting, running, batch, target) == pytest.approx(expected)


@pytest.mark.parametrize(
    ("arrivals", "mu", "waiting", "expected"),
    [
        (12.0, 1.6, [99, 1000], 9.0),  # docstring: 7.5 + 0.5 + 1 (capped)
        (12.0, 1.6, [3, 3], 7.5),  # at target: keep up only
        (0.0, 1.6, [0], 0.0),
        (3.2, 1.6, [3 + 1.6 * 120], 3.0),  # excess drains in exactly 120 s: one full replica
    ],
)
def test_rate_queue_replicas(arrivals: float, mu: float, waiting: list[float], expected: float) -> None:
    assert rate_queue_replicas(arrivals, mu, waiting, 3.0, 120.0) == pytest.approx(expected)


def test_fleet_throughput() -> None:
    # docstring: (1.5 + 1.7) * 3 / 2 = 4.8; a pod without a series yet counts 0: 1.5 * 3 / 2
    a = pod("a", 0, 0, 0, 1000.0, done=1.5)
    b = pod("b", 0, 0, 0, 1000.0, done=1.7)
    silent = pod("c", 0, 0, 0, 1000.0)
    assert fleet_throughput((a, b), 3, 1000.0, 60.0) == pytest.approx(4.8)
    assert fleet_throughput((a, silent), 3, 1000.0, 60.0) == pytest.approx(2.25)
    assert fleet_throughput((silent,), 1, 1000.0, 60.0) is None
    # docstring of throughput_partial
    assert throughput_partial((a, silent), 1000.0, 60.0) and not throughput_partial((a, b), 1000.0, 60.0)
    assert fleet_throughput((pod("d", 0, 0, 0, 900.0, done=1.5),), 1, 1000.0, 60.0) is None  # stale


def test_arrival_rate() -> None:
    # docstring: growth 60 / 30 = 2, mean throughput 3.2 -> 5.2
    load = ((0.0, 100.0), (15.0, 130.0), (30.0, 160.0))
    thr = ((0.0, 3.0), (15.0, 3.2), (30.0, 3.4))
    assert arrival_rate(load, thr) == pytest.approx(5.2)
    assert arrival_rate(load, ()) is None
    assert arrival_rate(((0.0, 100.0),), ((0.0, 2.0),)) == pytest.approx(2.0)  # one sample: no growth term
    assert arrival_rate(((0.0, 500.0), (30.0, 100.0)), ((30.0, 1.0),)) == 0.0  # never negative
    # docstring of mean_throughput: the arrivals' own denominator
    assert mean_throughput(thr) == pytest.approx(3.2) and mean_throughput(()) is None
    # the mean given (the caller has it already): the same float; another mean is used as given
    assert arrival_rate(load, thr, mean_throughput(thr)) == arrival_rate(load, thr)
    assert arrival_rate(load, thr, 1.0) == pytest.approx(3.0)


@pytest.mark.parametrize(
    ("running", "target", "expected"),
    [(1086.0, 96.0, 1086 / 96), (1086.0, None, 0.0), (0.0, 96.0, 0.0)],  # docstring: 11.3; off: 0
)
def test_batch_replicas(running: float, target: float | None, expected: float) -> None:
    assert batch_replicas(running, target) == pytest.approx(expected)


@pytest.mark.parametrize(
    ("running", "ready", "expected"),
    [
        (1086.0, 6, 9.0),  # docstring: 11.3 wanted, at most 6 x 1.5 = 9 per reading
        (1086.0, 8, 1086 / 96),  # 11.3 <= 12: unbounded
        (9644.0, 33, 49.5),  # the congested ServeGen fleet at target 96: 100.5 -> 33 x 1.5
    ],
)
def test_batch_replicas_grow_at_most_the_ratio_per_reading(running: float, ready: int, expected: float) -> None:
    assert batch_replicas(running, 96.0, ready, 1.5) == pytest.approx(expected)


@pytest.mark.parametrize(
    ("kv_total", "target", "expected"),
    [(3.6, 0.8, 4.5), (0.0, 0.8, 0.0), (1.6, 0.8, 2.0)],  # docstring: 4 x 0.9 / 0.8 = 4.5
)
def test_kv_replicas(kv_total: float, target: float, expected: float) -> None:
    assert kv_replicas(kv_total, target) == pytest.approx(expected)


DEMAND_KW = dict(
    target_waiting_per_replica=3.0,
    target_kv_cache_usage_ratio=0.8,
    saturated_waiting_per_replica=1.0,
    queue_drain_seconds=120.0,
)


def test_compute_demand_extrapolates_unhealthy_pods() -> None:
    # docstring: 2 of 3 ready pods healthy; scale 1.5; batch model (no throughput series)
    healthy = (pod("a", 4, 8, 0.9, 0.0), pod("b", 2, 8, 0.7, 0.0))
    d = compute_demand(healthy, 3, None, 0.0, 60.0, **DEMAND_KW)  # type: ignore[arg-type]
    assert d.queue_model == "batch"
    assert d.waiting_total == pytest.approx(9.0)
    assert d.running_total == pytest.approx(24.0)
    assert d.kv_usage_total == pytest.approx(2.4)
    assert d.queue_replicas == pytest.approx(3.0)  # (9 + 24) / (8 + 3)
    assert d.kv_replicas == pytest.approx(3.0)  # 2.4 / 0.8


def test_compute_demand_needs_a_healthy_pod() -> None:
    with pytest.raises(ValueError, match="at least one healthy"):
        compute_demand((), 2, None, 0.0, 60.0, **DEMAND_KW)  # type: ignore[arg-type]


def test_gauges_docstring() -> None:
    # pods (4, 8, 0.9) and (2, 8, 0.7): ([4, 2], [8, 8], 1.6), in one pass
    waits, runs, kv = _gauges((pod("a", 4, 8, 0.9, 0.0), pod("b", 2, 8, 0.7, 0.0)))
    assert (waits, runs) == ([4.0, 2.0], [8.0, 8.0]) and kv == pytest.approx(1.6)
    with pytest.raises(ValueError, match="without a sample"):
        _gauges((pod("a", 4, None, 0.9, 0.0),))


def test_compute_demand_no_queue_asks_nothing() -> None:
    # nobody waits: the queue asks for 0 replicas, whatever the model; KV decides
    d = compute_demand((pod("a", 0, 30, 0.5, 0.0),), 1, 5.0, 0.0, 60.0, **DEMAND_KW)  # type: ignore[arg-type]
    assert (d.queue_model, d.queue_replicas, d.kv_replicas) == ("none", 0.0, 0.625)


def test_compute_demand_batch_model_at_most_doubles() -> None:
    # 2 pods, 500 waiting each, batch 32: (1000 + 64) / 35 = 30.4, but at most 2 + 2 = 4
    d = compute_demand((pod("a", 500, 32, 1.0, 0.0), pod("b", 500, 32, 1.0, 0.0)), 2, None, 0.0, 60.0,
                       **DEMAND_KW)  # type: ignore[arg-type]
    assert d.queue_replicas == pytest.approx(4.0)


# --- step 3: lead time -------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("values", "q", "expected"),
    [
        ([100, 120, 130, 140, 400], 0.9, 296.0),  # docstring
        ([50], 0.9, 50.0),
        ([10, 20], 0.5, 15.0),
        ([10, 20, 30], 1.0, 30.0),
    ],
)
def test_percentile(values: list[float], q: float, expected: float) -> None:
    assert percentile(values, q) == pytest.approx(expected)


def test_learn_lead_times_docstring_example() -> None:
    # tick 1: p2 is waiting for a node
    s1 = learn_lead_times(
        LeadTimeState(), obs(2, (), pods_in_flight=(flying("p2", PodStage.UNSCHEDULABLE, 500.0),)), 600.0, P
    )
    assert s1.seen_unschedulable == ("p2",)
    assert s1.node_provision_samples == ()
    # tick 2: p2 was scheduled at 800; p1 became ready after 240 s of loading
    p1 = pod("p1", 0, 0, 0, 1300.0, startup=PodStartup(created_at=990.0, scheduled_at=1000.0, ready_at=1240.0))
    o2 = obs(2, (p1,), pods_in_flight=(flying("p2", PodStage.LOADING, 500.0, 800.0),))
    s2 = learn_lead_times(s1, o2, 1300.0, P)
    assert s2.model_load_samples == ((1300.0, 240.0),)
    assert s2.node_provision_samples == ((1300.0, 300.0),)
    # tick 3: the same pods add nothing
    assert learn_lead_times(s2, o2, 1315.0, P).model_load_samples == s2.model_load_samples


@pytest.mark.parametrize(
    ("sample_age", "kept"),
    [(604_799.0, True), (604_800.0, False)],  # window 7 days: the edge drops out
)
def test_lead_time_samples_expire_at_window_edge(sample_age: float, kept: bool) -> None:
    now = 1_000_000.0
    state = LeadTimeState(model_load_samples=((now - sample_age, 100.0),))
    after = learn_lead_times(state, obs(1, ()), now, P)
    assert (len(after.model_load_samples) == 1) is kept


def test_lead_time_samples_keep_only_newest() -> None:
    params = PolicyParams(lead_time_max_samples=2)
    state = LeadTimeState(model_load_samples=((1.0, 10.0), (2.0, 20.0), (3.0, 30.0)))
    assert learn_lead_times(state, obs(1, ()), 10.0, params).model_load_samples == ((2.0, 20.0), (3.0, 30.0))


@pytest.mark.parametrize(
    ("load_samples", "node_samples", "expected"),
    [
        # docstring: 5 load samples -> 296 learned; 1 node sample is too few -> default 300
        ([100, 120, 130, 140, 400], [200], LeadTimeEstimate(296.0, 300.0, True, False)),
        ([100, 120], [], LeadTimeEstimate(300.0, 300.0, False, False)),  # 2 < 3 samples
        ([100, 100, 100], [60, 60, 60], LeadTimeEstimate(100.0, 60.0, True, True)),  # exactly 3
    ],
)
def test_estimate_lead_time(load_samples: list[float], node_samples: list[float], expected: LeadTimeEstimate) -> None:
    state = LeadTimeState(
        model_load_samples=tuple((float(i), s) for i, s in enumerate(load_samples)),
        node_provision_samples=tuple((float(i), s) for i, s in enumerate(node_samples)),
    )
    got = estimate_lead_time(state, P)
    assert got.model_load_seconds == pytest.approx(expected.model_load_seconds)
    assert got.node_provision_seconds == pytest.approx(expected.node_provision_seconds)
    assert (got.model_load_learned, got.node_provision_learned) == (
        expected.model_load_learned,
        expected.node_provision_learned,
    )


@pytest.mark.parametrize(
    ("free", "add", "gpus", "expected"),
    [
        (3, 2, 2, True),  # docstring: 4 GPUs needed, 3 free
        (4, 2, 2, False),  # exactly enough
        (None, 1, 1, True),  # unknown: assume a node is needed
        (0, 0, 1, False),  # nothing to add
    ],
)
def test_node_needed(free: int | None, add: int, gpus: int, expected: bool) -> None:
    assert node_needed(free, add, gpus) is expected


def test_lead_time_state_round_trips() -> None:
    state = LeadTimeState(
        model_load_samples=((1.0, 240.0),),
        node_provision_samples=((2.0, 300.0),),
        recorded_pods=("a",),
        recorded_node_pods=("b",),
        seen_unschedulable=("b",),
    )
    assert LeadTimeState.from_dict(state.to_dict()) == state
    with pytest.raises(ValueError):
        LeadTimeState.from_dict({"version": 2})
    with pytest.raises(ValueError):
        LeadTimeState.from_dict({"version": 1, "model_load_samples": [[1.0, float("nan")]]})


# --- step 4: forecast ---------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("history", "now", "expected_times"),
    [
        (((1000.0, 1.0),), 1120.0, [1120.0]),  # docstring: exactly 120 s old drops
        (((1001.0, 1.0),), 1120.0, [1001.0, 1120.0]),  # 119 s old stays
    ],
)
def test_update_load_history_window(
    history: tuple[tuple[float, float], ...], now: float, expected_times: list[float]
) -> None:
    assert [t for t, _ in update_load_history(history, now, 5.0, 120.0)] == expected_times


def test_update_load_history_disabled() -> None:
    assert update_load_history(((1.0, 1.0),), 2.0, 3.0, 0.0) == ()


def test_trend() -> None:
    assert trend(((0.0, 40.0), (15.0, 45.0), (30.0, 50.0))) == pytest.approx(1 / 3)  # docstring
    assert trend(((0.0, 40.0),)) == 0.0
    assert trend(((5.0, 40.0), (5.0, 50.0))) == 0.0


@pytest.mark.parametrize(
    ("history", "load", "demand", "lead", "expected_load", "expected_replicas"),
    [
        # docstring: slope 1/3, 50 + 100 = 150, bounded to 100 -> 5 * 2 = 10
        (((0.0, 40.0), (15.0, 45.0), (30.0, 50.0)), 50.0, 5.0, 300.0, 100.0, 10.0),
        # unbounded: 60 s lead -> 50 + 20 = 70 -> 5 * 1.4 = 7
        (((0.0, 40.0), (15.0, 45.0), (30.0, 50.0)), 50.0, 5.0, 60.0, 70.0, 7.0),
        # falling trend never lowers the demand
        (((0.0, 60.0), (15.0, 55.0), (30.0, 50.0)), 50.0, 5.0, 300.0, 50.0, 5.0),
        # too few samples: no forecast
        (((15.0, 45.0), (30.0, 50.0)), 50.0, 5.0, 300.0, 50.0, 5.0),
    ],
)
def test_forecast(
    history: tuple[tuple[float, float], ...],
    load: float,
    demand: float,
    lead: float,
    expected_load: float,
    expected_replicas: float,
) -> None:
    fc = forecast(history, load, demand, lead, PolicyParams(forecast_max_growth_ratio=2.0))
    assert fc.load == pytest.approx(expected_load)
    assert fc.replicas == pytest.approx(expected_replicas)


# --- step 5: capacity in flight -----------------------------------------------------------------
LEAD = LeadTimeEstimate(model_load_seconds=240.0, node_provision_seconds=300.0, model_load_learned=True,
                        node_provision_learned=True)


def test_pod_eta_docstring_example() -> None:
    assert pod_eta(flying("a", PodStage.UNSCHEDULABLE, 1000.0), LEAD) == (1540.0, 540.0)
    assert pod_eta(flying("b", PodStage.LOADING, 1050.0, 1100.0), LEAD) == (1340.0, 240.0)


@pytest.mark.parametrize(
    ("scheduled", "counted", "overdue"),
    [
        (1700.0, 1, 0),  # docstring: due 1940, 60 s late: counted
        (1520.0, 1, 0),  # due 1760, exactly 240 s late: still counted
        (1519.0, 0, 1),  # 241 s late: overdue
        (1500.0, 0, 1),  # docstring: 260 s late: overdue
    ],
)
def test_assess_in_flight_overdue_edge(scheduled: float, counted: int, overdue: int) -> None:
    got = assess_in_flight((flying("a", PodStage.LOADING, scheduled - 10, scheduled),), LEAD, 2000.0)
    assert (got.counted, got.overdue) == (counted, overdue)
    assert got.by_stage == {"loading": 1}


@pytest.mark.parametrize(
    ("rec", "demand_now", "in_flight", "expected"),
    [
        (15, 10, 7, 10),  # docstring: capped at the demand now
        (15, 8, 7, 9),  # docstring: capped at the plan
        (15, 14, 7, 15),  # docstring: ceil(9 x 1.5) = 14 outgrows the plan: stands
        (15, 13, 7, 13),  # one below the edge: capped
        (15, 10, 0, 15),  # docstring: nothing in flight
        (8, 3, 7, 8),  # not above current (9)... below it: untouched
    ],
)
def test_cap_for_in_flight(rec: int, demand_now: int, in_flight: int, expected: int) -> None:
    flight = assess_in_flight(
        tuple(flying(f"f{i}", PodStage.LOADING, 1990.0, 1995.0) for i in range(in_flight)), LEAD, 2000.0
    )
    assert cap_for_in_flight(rec, demand_now, planned=9, current=9, in_flight=flight, growth_ratio=1.5) == expected


# --- step 6: stabilisation ------------------------------------------------------------------------
P600 = PolicyParams(scale_down_window_seconds=600)


@pytest.mark.parametrize(
    ("params", "lead_s", "now", "expected"),
    [
        (P600, 0.0, 1000.0, 4),  # docstring: the 6 at t=400 is exactly 600 s old: out; highest inside is 4
        (P600, 0.0, 999.0, 6),  # docstring: 599 s old: inside, stay at 6
        (P600, 0.0, 1301.0, 3),  # both out of the window (the 4 is 601 s old): down to 3
        (P, 390.0, 1000.0, 4),  # docstring: window 300 but lead 390: the 4 (300 s old) is inside
        (P, 0.0, 1000.0, 3),  # window 300 alone: the 4 is exactly 300 s old: out, down to 3
        (P, 390.0, 1090.0, 3),  # 390 s after the 4: out of the lead-time window too
        (P600, 390.0, 999.0, 6),  # a lead time shorter than the window changes nothing
    ],
)
def test_scale_down_window(params: PolicyParams, lead_s: float, now: float, expected: int) -> None:
    history = ((400.0, 6), (700.0, 4))
    assert stabilize(history, 3, 6, now, params, lead_s).replicas == expected


def test_scale_up_is_immediate_by_default() -> None:
    assert stabilize(((990.0, 2),), 8, 2, 1000.0, P).replicas == 8


@pytest.mark.parametrize(("now", "expected"), [(1060.0, 8), (1059.0, 5)])
def test_scale_up_window_when_configured(now: float, expected: int) -> None:
    params = PolicyParams(scale_up_window_seconds=60)
    assert stabilize(((1000.0, 5),), 8, 2, now, params).replicas == expected


def test_stabilize_records_and_prunes() -> None:
    # window 600 s: the 5 (1000 s old) and the 4 at 500 (exactly 600 s old) drop out
    got = stabilize(((100.0, 5), (500.0, 4), (501.0, 4)), 3, 4, 1100.0, P600)
    assert got.recommendations == ((501.0, 4), (1100.0, 3))


# --- step 7: rate limits and bounds ----------------------------------------------------------------
@pytest.mark.parametrize(
    ("now", "expected"),
    [
        (1010.0, 6),  # docstring: 4 added 10 s ago: period began at 2 -> max(4, 6) = 6
        (1014.0, 6),  # 14 s: still inside
        (1015.0, 12),  # docstring: exactly 15 s: out -> max(12, 10) = 12
    ],
)
def test_scale_up_limit(now: float, expected: int) -> None:
    assert scale_up_limit(6, ((1000.0, 4),), (), now, P) == expected


@pytest.mark.parametrize(
    ("now", "expected"),
    [
        (1119.0, 5),  # docstring: removed 119 s ago: period began at 6 -> 5
        (1120.0, 4),  # docstring: at 120 s the removal leaves the period -> 4
    ],
)
def test_scale_down_limit(now: float, expected: int) -> None:
    assert scale_down_limit(5, (), ((1000.0, 1),), now, P) == expected


def test_scale_down_limit_ignores_scale_ups_in_the_period() -> None:
    # docstring: 5 -> 8 ten seconds ago; HPA would allow 8 -> 4, we allow 7
    assert scale_down_limit(8, ((990.0, 3),), (), 1000.0, P) == 7


def test_bounds_gpu_budget() -> None:
    params = PolicyParams(max_replicas=10, max_gpus=12, gpus_per_replica=2)
    assert bounds(params) == (1, 6, Clamp.GPU_BUDGET)  # docstring: 12 // 2 = 6 < 10
    assert bounds(P) == (1, 10, Clamp.MAX_REPLICAS)


@pytest.mark.parametrize(
    ("desired", "current", "params", "expected", "clamp"),
    [
        (20, 2, P, 6, Clamp.SCALE_UP_RATE),  # docstring: max(2 * 2, 2 + 4) = 6
        (0, 1, P, 1, Clamp.MIN_REPLICAS),  # docstring
        (3, 2, P, 3, None),
        (1, 5, P, 4, Clamp.SCALE_DOWN_RATE),  # 1 pod per period
        (40, 30, PolicyParams(max_replicas=32), 32, Clamp.MAX_REPLICAS),
        (1, 12, PolicyParams(max_replicas=8), 8, Clamp.MAX_REPLICAS),  # bounds beat the down rate
        (8, 6, PolicyParams(max_gpus=6), 6, Clamp.GPU_BUDGET),
        (2, 0, P, 2, None),  # from zero: +4 allowed
    ],
)
def test_apply_limits(desired: int, current: int, params: PolicyParams, expected: int, clamp: Clamp | None) -> None:
    got = apply_limits(desired, current, (), (), 1000.0, params)
    assert (got.replicas, got.clamp) == (expected, clamp)


def test_record_event_prunes_by_period() -> None:
    ups, downs = record_event(((900.0, 2), (990.0, 1)), ((800.0, 1),), 4, 6, 1000.0, P)
    assert ups == ((990.0, 1), (1000.0, 2))
    assert downs == ()  # 200 s old, period 120 s: dropped


# --- whole replicas ---------------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("need", "expected"),
    [
        (4.18, 5),  # docstring: rounded up
        (4.0000000001, 4),  # docstring: float noise above 4 is 4
        (1e12, 1_000_000),  # docstring: absurd, capped
        (float("nan"), 1_000_000),  # docstring
        (4.0, 4),
        (0.0, 0),
    ],
)
def test_whole_replicas(need: float, expected: int) -> None:
    assert whole_replicas(need) == expected


# --- steps 2 to 4 together: sizing --------------------------------------------------------------------
LEAD_DEFAULT = LeadTimeEstimate(300.0, 300.0, False, False)


def test_size_docstring_example() -> None:
    # batch model: min(46 / 11 = 4.18, 2 + 2) = 4; KV 1.9 / 0.8 = 2.375; 2 to add, no free GPU: 600 s
    o = obs(2, (pod("a", 15, 8, 0.95, 1000.0), pod("b", 15, 8, 0.95, 1000.0)), free_gpus=0)
    got = size(P, o, PolicyState(), assess_health(o.ready_pods, 1000.0, 60.0), 0, LEAD_DEFAULT, 1000.0)
    assert got.demand is not None and got.forecast is not None
    assert (got.demand.queue_model, got.demand_replicas, got.lead_time_seconds) == ("batch", 4.0, 600.0)
    assert got.demand.kv_replicas == pytest.approx(2.375)
    assert got.forecast.replicas == 4.0  # one reading: no trend
    assert got.load_history == ((1000.0, 46.0),)


def test_size_without_ready_pods() -> None:
    # docstring: no demand, the lead time of one replica (no free GPU: with a node, 600 s)
    state = PolicyState(load_history=((985.0, 10.0),))
    got = size(P, obs(2, (), free_gpus=0), state, assess_health((), 1000.0, 60.0), 0, LEAD_DEFAULT, 1000.0)
    assert (got.demand, got.forecast, got.demand_replicas, got.lead_time_seconds) == (None, None, 0.0, 600.0)
    assert got.load_history is state.load_history  # the readings unchanged


def test_read_demand_docstring_example() -> None:
    # load 46 now, 20 thirty seconds ago; 3.2 requests/s finished: arrivals 3.2 + 26 / 30 = 4.07;
    # keep up 4.07 / 1.6 = 2.54, drain help 2 x 12 / (1.6 x 120) = 0.125
    ready = (pod("a", 15, 8, 0.95, 1000.0, done=1.6), pod("b", 15, 8, 0.95, 1000.0, done=1.6))
    state = PolicyState(load_history=((970.0, 20.0),))
    demand, loads, throughputs = read_demand(P, assess_health(ready, 1000.0, 60.0), 2, state, 1000.0)
    assert demand.arrivals_per_second == pytest.approx(3.2 + 26 / 30)
    assert demand.queue_replicas == pytest.approx((3.2 + 26 / 30) / 1.6 + 0.125)
    assert (loads, throughputs) == (((970.0, 20.0), (1000.0, 46.0)), ((1000.0, 3.2),))


# --- the recommendation, from the sizing to step 6 ---------------------------------------------------
def sizing(demand: float | None, forecast: float | None = None, model: str = "batch") -> Sizing:
    """A sizing whose demand asks for `demand` replicas (the queue) and its forecast for `forecast`."""
    if demand is None:
        return Sizing(None, None, 0.0, 300.0, (), (), ())
    d = Demand(0.0, 0.0, 0.0, 0, None, None, None, model, demand, 0.0)
    return Sizing(d, Forecast(0.0, 0.0, demand if forecast is None else forecast), demand, 300.0, (), (), ())


FOUR_READY = obs(4, pods(4, 0, 0, 0.5, 1000.0))


@pytest.mark.parametrize(
    ("o", "s", "expected"),
    [
        (FOUR_READY, sizing(4.36, 4.2), Recommendation(4, Reason.HOLD_WITHIN_TOLERANCE)),  # docstring
        (FOUR_READY, sizing(3.95, 5.9), Recommendation(6)),  # docstring: 5.9 -> 6
        (FOUR_READY, sizing(3.5), Recommendation(4)),  # 3.5 / 4 is 12.5 % off: 4, not a hold
        (FOUR_READY, sizing(2.2), Recommendation(3)),
        (obs(4, ()), sizing(None), Recommendation(4, Reason.HOLD_NO_READY_PODS)),  # docstring
        (FOUR_READY, sizing(None), Recommendation(4, Reason.HOLD_METRICS_UNHEALTHY, Clamp.UNHEALTHY_METRICS)),
    ],
)
def test_recommend(o: Observation, s: Sizing, expected: Recommendation) -> None:
    assert recommend(s, o, P) == expected


HEALTHY = (pod("a", 0, 0, 0.1, 1000.0, done=1.0), pod("b", 0, 0, 0.1, 1000.0, done=1.0))
ONE_NAN = (pod("a", 0, 0, 0.1, 1000.0), pod("b", 0, 0, float("nan"), 1000.0))
NO_THROUGHPUT = (pod("a", 0, 0, 0.1, 1000.0, done=1.0), pod("b", 0, 0, 0.1, 1000.0))
HELD_UNHEALTHY = Recommendation(4, Reason.HOLD_METRICS_UNHEALTHY, Clamp.UNHEALTHY_METRICS)


@pytest.mark.parametrize(
    ("rec", "ready", "model", "expected"),
    [
        (Recommendation(1), ONE_NAN, "batch", HELD_UNHEALTHY),  # docstring: a NaN sample: hold at 4
        (Recommendation(1), HEALTHY, "batch", Recommendation(1)),  # docstring: all healthy
        (Recommendation(6), ONE_NAN, "batch", Recommendation(6)),  # docstring: up stands
        (Recommendation(1), NO_THROUGHPUT, "rate", HELD_UNHEALTHY),  # the rate model read a pod as idle
        (Recommendation(1), NO_THROUGHPUT, "batch", Recommendation(1)),  # the batch model did not
    ],
)
def test_hold_on_partial_data(rec: Recommendation, ready: tuple, model: str, expected: Recommendation) -> None:
    health = assess_health(ready, 1000.0, 60.0)
    assert hold_on_partial_data(rec, 4, sizing(1.0, model=model), health, 1000.0, P) == expected


@pytest.mark.parametrize(
    ("demand_now", "expected"),
    [
        (10.0, Recommendation(10)),  # docstring: capped at the demand now
        (8.0, Recommendation(9, Reason.HOLD_CAPACITY_IN_FLIGHT)),  # docstring: at the plan, = current
        (14.0, Recommendation(15)),  # outgrows the plan (ceil(9 x 1.5) = 14): stands
    ],
)
def test_wait_for_capacity_in_flight(demand_now: float, expected: Recommendation) -> None:
    flight = assess_in_flight(
        tuple(flying(f"f{i}", PodStage.LOADING, 1990.0, 1995.0) for i in range(7)), LEAD, 2000.0
    )
    assert wait_for_capacity_in_flight(Recommendation(15), sizing(demand_now), 9, 9, flight, P) == expected


@pytest.mark.parametrize(
    ("slo_base", "expected"),
    [
        # The SLO asks for 14 with its headroom, 8 without: the 8 is its demand now, at the plan:
        # hold at 9 (the headroom is growth the 7 pods in flight already answer).
        (8.0, Recommendation(9, Reason.HOLD_CAPACITY_IN_FLIGHT)),
        (10.0, Recommendation(10)),  # the SLO's demand now outgrows the current 9: 10
    ],
)
def test_wait_for_capacity_in_flight_reads_the_slo_without_headroom(slo_base: float, expected: Recommendation) -> None:
    flight = assess_in_flight(
        tuple(flying(f"f{i}", PodStage.LOADING, 1990.0, 1995.0) for i in range(7)), LEAD, 2000.0
    )
    slo = SloSignal(slo_base, 1.0, 1.0, (1.0, 1.0), False, 2.0, None, None, None, False, False, 1.0, SloState())
    with_slo = dataclasses.replace(sizing(5.0), slo=slo, slo_replicas=14.0, slo_headroom_ratio=1.75)
    assert wait_for_capacity_in_flight(Recommendation(15), with_slo, 9, 9, flight, P) == expected


# --- step 8: rollout in progress ------------------------------------------------------------------------
LOADING_TWO = (flying("a", PodStage.LOADING, 990.0, 995.0), flying("b", PodStage.LOADING, 990.0, 995.0))


@pytest.mark.parametrize(("rolling", "expected"), [(False, LOADING_TWO), (True, ())])  # docstring
def test_counted_in_flight(rolling: bool, expected: tuple) -> None:
    assert counted_in_flight(obs(2, (), pods_in_flight=LOADING_TWO, rollout_in_progress=rolling)) == expected


@pytest.mark.parametrize(
    ("rolling", "rec", "expected"),
    [
        (True, Recommendation(1), Recommendation(4, Reason.HOLD_ROLLOUT, Clamp.ROLLOUT)),  # docstring
        (True, Recommendation(6), Recommendation(6)),  # docstring: up stands
        (False, Recommendation(1), Recommendation(1)),  # docstring: no rollout
    ],
)
def test_hold_for_rollout(rolling: bool, rec: Recommendation, expected: Recommendation) -> None:
    assert hold_for_rollout(rec, obs(4, (), rollout_in_progress=rolling)) == expected


# --- step 5 again: the plan after the tick -----------------------------------------------------------------
@pytest.mark.parametrize(
    ("planned", "rec", "desired", "current", "expected"),
    [
        (9, 12, 11, 8, 12),  # docstring: the recommendation, which the rate limit catches up to
        (None, 6, 6, 4, 6),  # docstring: no plan, 4 -> 6
        (9, 8, 8, 8, 9),  # docstring: a hold keeps the plan
        (None, 3, 3, 4, None),  # docstring: a scale-down keeps no plan
    ],
)
def test_plan_after(planned: int | None, rec: int, desired: int, current: int, expected: int | None) -> None:
    assert plan_after(planned, rec, desired, current) == expected


# --- the outcome: clamp and reason ----------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("limit_clamp", "stabilized", "rec", "expected"),
    [
        (None, 4, Recommendation(3), Clamp.SCALE_DOWN_WINDOW),  # docstring: 3 held at 4
        (None, 5, Recommendation(8), Clamp.SCALE_UP_WINDOW),  # docstring: 8 held at 5
        (None, 4, Recommendation(4, Reason.HOLD_ROLLOUT, Clamp.ROLLOUT), Clamp.ROLLOUT),  # docstring
        (Clamp.SCALE_DOWN_RATE, 4, Recommendation(3), Clamp.SCALE_DOWN_RATE),  # docstring: the limit first
        (None, 4, Recommendation(4), None),  # docstring
    ],
)
def test_clamp(limit_clamp: Clamp | None, stabilized: int, rec: Recommendation, expected: Clamp | None) -> None:
    assert clamp(Limited(4, limit_clamp), stabilized, rec) == expected


@pytest.mark.parametrize(
    ("current", "limited", "stabilized", "rec", "s", "expected"),
    [
        (2, Limited(5, None), 5, Recommendation(5), sizing(5.0), Reason.SCALE_UP_QUEUE),  # docstring
        (2, Limited(5, None), 5, Recommendation(5), sizing(2.5, 5.0), Reason.SCALE_UP_FORECAST),  # docstring
        (1, Limited(2, Clamp.MIN_REPLICAS), 1, Recommendation(1), sizing(1.0), Reason.SCALE_UP_MIN_REPLICAS),
        (12, Limited(8, Clamp.MAX_REPLICAS), 12, Recommendation(12), sizing(12.0), Reason.SCALE_DOWN_MAX_REPLICAS),
        (5, Limited(4, None), 4, Recommendation(4), sizing(4.0), Reason.SCALE_DOWN),  # docstring
        (4, Limited(4, None), 4, Recommendation(3), sizing(3.0), Reason.HOLD_SCALE_DOWN_WINDOW),  # docstring
        (4, Limited(4, Clamp.SCALE_DOWN_RATE), 3, Recommendation(3), sizing(3.0), Reason.HOLD_SCALE_DOWN_RATE),
        (4, Limited(4, None), 4, Recommendation(4, Reason.HOLD_WITHIN_TOLERANCE), sizing(4.2),
         Reason.HOLD_WITHIN_TOLERANCE),  # docstring: a held recommendation gives its hold
        (4, Limited(4, None), 4, Recommendation(4), sizing(4.0), Reason.HOLD_STEADY),  # docstring
        # docstring: 6 asked for, kept at 4 by the rate limit (it said hold_steady before: a review)
        (4, Limited(4, Clamp.SCALE_UP_RATE), 6, Recommendation(6), sizing(6.0), Reason.HOLD_SCALE_UP_LIMITED),
        (8, Limited(8, Clamp.MAX_REPLICAS), 9, Recommendation(9), sizing(9.0), Reason.HOLD_SCALE_UP_LIMITED),
    ],
)
def test_reason(
    current: int, limited: Limited, stabilized: int, rec: Recommendation, s: Sizing, expected: Reason
) -> None:
    assert reason(current, limited, stabilized, rec, s) == expected
