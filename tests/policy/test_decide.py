"""decide() as a whole: table tests with explicit `now`, the arithmetic in the comments."""

from __future__ import annotations

import pytest

from autoscaler.policy import (
    Clamp,
    Decision,
    LeadTimeState,
    Observation,
    PodStage,
    PodStartup,
    PolicyParams,
    PolicyState,
    Reason,
    decide,
)

from .builders import flying, obs, pod, pods

P = PolicyParams()
NOW = 10_000.0


def run(o: Observation, state: PolicyState | None = None, params: PolicyParams = P, now: float = NOW) -> Decision:
    return decide(params, o, state or PolicyState(), now)[0]


def test_docstring_example_queue_burst() -> None:
    # 2 pods x (15 waiting, 8 running, KV 0.95, 1.6 finished/s); the load grew from 20 to 46 in
    # the last 30 s; no free GPU. Arrivals 3.2 + 26 / 30 = 4.07/s; keep up 4.07 / 1.6 = 2.54,
    # drain help 2 x (15 - 3) / (1.6 x 120) = 0.125: 2.67; KV 1.9 / 0.8 = 2.375 -> 3 replicas;
    # lead time 300 + 300 = 600 s.
    state = PolicyState(load_history=((NOW - 30, 20.0),))
    d = run(obs(2, pods(2, 15, 8, 0.95, NOW, done=1.6), free_gpus=0), state)
    assert (d.desired_replicas, d.reason, d.clamp) == (3, Reason.SCALE_UP_QUEUE, None)
    assert d.values.arrivals_per_second == pytest.approx(3.2 + 26 / 30)
    assert d.values.queue_replicas == pytest.approx((3.2 + 26 / 30) / 1.6 + 0.125)
    assert d.values.queue_model == "rate"
    assert d.values.lead_time_seconds == 600.0
    # the scale-down window in force: 300 s configured, stretched to the 600 s lead time with a node
    assert d.values.scale_down_window_seconds == 600.0
    off = run(obs(2, pods(2, 15, 8, 0.95, NOW, done=1.6), free_gpus=0), state,
              P.model_copy(update={"scale_down_window_lead_times": 0.0}))
    assert off.values.scale_down_window_seconds == 300.0


def test_batch_model_without_throughput() -> None:
    # the same pods without a throughput series: (30 + 16) / (8 + 3) = 4.18, at most one more
    # replica per pod queued above target: 2 + 2 = 4
    d = run(obs(2, pods(2, 15, 8, 0.95, NOW), free_gpus=0))
    assert (d.desired_replicas, d.reason, d.values.queue_model) == (4, Reason.SCALE_UP_QUEUE, "batch")


@pytest.mark.parametrize(
    ("name", "o", "state", "params", "desired", "reason", "clamp"),
    [
        (
            # 4 pods at KV 0.95, no queue: KV 3.8 / 0.8 = 4.75 -> 5; queue (0 + 16) / (4 + 3) = 2.3
            "kv-drives-up",
            obs(4, pods(4, 0, 4, 0.95, NOW), free_gpus=8),
            None, P, 5, Reason.SCALE_UP_KV_CACHE, None,
        ),
        (
            # load 40 now, 3 samples rising 1/3 per s; demand 4 x 0.79 / 0.8 = 3.95 (within 10 % of 4);
            # lead 300 s (8 free GPUs): 40 + 100 = 140, bounded to 1.5 x 40 = 60 -> 3.95 x 1.5 = 5.9 -> 6
            "forecast-drives-up",
            obs(4, pods(4, 0, 10, 0.79, NOW), free_gpus=8),
            PolicyState(load_history=((NOW - 30, 30.0), (NOW - 15, 35.0))),
            P, 6, Reason.SCALE_UP_FORECAST, None,
        ),
        (
            # batch signal on: 4 pods with 40 running each (KV 0.5, no queue), target 32 per
            # replica: 160 / 32 = 5 -> 5; KV 2.0 / 0.8 = 2.5
            "batch-drives-up",
            obs(4, pods(4, 0, 40, 0.5, NOW), free_gpus=8),
            None, PolicyParams(target_running_per_replica=32), 5, Reason.SCALE_UP_BATCH, None,
        ),
        (
            # every sample 61 s old (stale after 60): hold, although the numbers say 1 replica
            "all-stale-holds",
            obs(4, pods(4, 0, 0, 0.0, NOW - 61)),
            None, P, 4, Reason.HOLD_METRICS_UNHEALTHY, Clamp.UNHEALTHY_METRICS,
        ),
        (
            # one pod's KV is NaN: the 3 healthy pods are idle, yet no scale-down
            "nan-never-reads-as-zero",
            obs(4, pods(3, 0, 0, 0.0, NOW) + (pod("x", 0, 0, float("nan"), NOW),)),
            None, P, 4, Reason.HOLD_METRICS_UNHEALTHY, Clamp.UNHEALTHY_METRICS,
        ),
        (
            # one pod absent, the 2 healthy ones are busy: extrapolate to 3 pods and scale up.
            # waiting 2 x 9 x 1.5 = 27, running 24: (27 + 24) / (8 + 3) = 4.6 -> 5
            "partial-data-still-scales-up",
            obs(3, pods(2, 9, 8, 0.9, NOW) + (pod("x", None, None, None, NOW),), free_gpus=8),
            None, P, 5, Reason.SCALE_UP_QUEUE, None,
        ),
        (
            "no-ready-pods-holds",
            obs(2, (), pods_in_flight=(flying("a", PodStage.LOADING, NOW - 20, NOW - 10),)),
            None, P, 2, Reason.HOLD_NO_READY_PODS, None,
        ),
        (
            # 4 pods: waiting 3, running 8 each: queue (12 + 32) / 11 = 4.0 -> exactly 4: hold
            "at-target-holds",
            obs(4, pods(4, 3, 8, 0.5, NOW)),
            None, P, 4, Reason.HOLD_WITHIN_TOLERANCE, None,
        ),
        (
            # demand 4.36 is within 10 % of 4 ready (|4.36/4 - 1| = 0.09): hold
            "within-tolerance-holds",
            obs(4, pods(4, 4, 8, 0.5, NOW)),
            None, P, 4, Reason.HOLD_WITHIN_TOLERANCE, None,
        ),
        (
            # idle (demand 0) but a recommendation of 4 at NOW - 599 is inside the 600 s window
            "scale-down-window-holds",
            obs(4, pods(4, 0, 0, 0.0, NOW)),
            PolicyState(recommendations=((NOW - 599, 4),)),
            P, 4, Reason.HOLD_SCALE_DOWN_WINDOW, Clamp.SCALE_DOWN_WINDOW,
        ),
        (
            # the same recommendation exactly 600 s old is out: down, 1 pod per 120 s -> 3
            "scale-down-one-pod-after-window",
            obs(4, pods(4, 0, 0, 0.0, NOW)),
            PolicyState(recommendations=((NOW - 600, 4),)),
            P, 3, Reason.SCALE_DOWN, Clamp.SCALE_DOWN_RATE,
        ),
        (
            # a pod was removed 119 s ago: the period began at 4, 4 - 1 = 3: hold at 3
            "scale-down-rate-holds",
            obs(3, pods(3, 0, 0, 0.0, NOW)),
            PolicyState(recommendations=((NOW - 600, 4),), scale_down_events=((NOW - 119, 1),)),
            P, 3, Reason.HOLD_SCALE_DOWN_RATE, Clamp.SCALE_DOWN_RATE,
        ),
        (
            # rollout: idle, but never down during a rollout
            "rollout-no-scale-down",
            obs(4, pods(4, 0, 0, 0.0, NOW), rollout_in_progress=True),
            None, P, 4, Reason.HOLD_ROLLOUT, Clamp.ROLLOUT,
        ),
        (
            # rollout with a real queue: up is still allowed, and the surge pod in flight is
            # not counted as capacity (no HOLD_CAPACITY_IN_FLIGHT). Batch model: 2 + 2 = 4
            "rollout-scale-up-ignores-surge",
            obs(2, pods(2, 15, 8, 0.9, NOW), free_gpus=8, rollout_in_progress=True,
                pods_in_flight=(flying("surge", PodStage.LOADING, NOW - 30, NOW - 20),)),
            None, P, 4, Reason.SCALE_UP_QUEUE, None,
        ),
        (
            # 3 of 5 replicas still loading. The 2 ready ones: 60 waiting, 8 running, 1.6 done/s;
            # load 66 -> 136 in 30 s: arrivals 3.2 + 2.33 = 5.53/s, keep up 3.46, drain help
            # 2 x 57 / 192 = 0.59: 4.05 -> 5, not above the plan (5). The arrivals rise
            # (3.0, 4.3, 5.53): the forecast asks for 4.05 x 1.5 = 6.1 -> 7, but while pods
            # load only the demand now counts: wait for the pods on their way
            "in-flight-pods-count",
            obs(5, pods(2, 60, 8, 0.95, NOW, done=1.6), free_gpus=0,
                pods_in_flight=tuple(flying(f"f{i}", PodStage.LOADING, NOW - 60, NOW - 50) for i in range(3))),
            PolicyState(load_history=((NOW - 30, 66.0),), arrival_history=((NOW - 30, 3.0), (NOW - 15, 4.3))),
            P, 5, Reason.HOLD_CAPACITY_IN_FLIGHT, None,
        ),
        (
            # spec 0 (someone scaled it down): bounds win, up to min 1 even with no data
            "below-min-scales-up",
            obs(0, ()),
            None, P, 1, Reason.SCALE_UP_MIN_REPLICAS, Clamp.MIN_REPLICAS,
        ),
        (
            # max lowered to 8 in the ConfigMap while at 12: down to 8 at once, config not data
            "above-max-scales-down",
            obs(12, pods(12, 3, 8, 0.5, NOW)),
            None, PolicyParams(max_replicas=8), 8, Reason.SCALE_DOWN_MAX_REPLICAS, Clamp.MAX_REPLICAS,
        ),
        (
            # GPU budget 6 GPUs at 2 per replica = 3 replicas, though the queue asks for 4
            "gpu-budget-clamps",
            obs(2, pods(2, 15, 8, 0.95, NOW), free_gpus=0),
            None, PolicyParams(max_gpus=6, gpus_per_replica=2), 3, Reason.SCALE_UP_QUEUE, Clamp.GPU_BUDGET,
        ),
        (
            # load 0 -> 216 in 15 s: arrivals 3.2 + 14.4 = 17.6/s, keep up 11 + drain 2 = 13
            # wanted; HPA's default limit max(2 x 2, 2 + 4) = 6 per 15 s
            "scale-up-rate-limited",
            obs(2, pods(2, 100, 8, 0.99, NOW, done=1.6), free_gpus=0),
            PolicyState(load_history=((NOW - 15, 0.0),)),
            PolicyParams(max_replicas=50), 6, Reason.SCALE_UP_QUEUE, Clamp.SCALE_UP_RATE,
        ),
    ],
)
def test_decide_table(
    name: str,
    o: Observation,
    state: PolicyState | None,
    params: PolicyParams,
    desired: int,
    reason: Reason,
    clamp: Clamp | None,
) -> None:
    d = run(o, state, params)
    assert (d.desired_replicas, d.reason, d.clamp) == (desired, reason, clamp), d.values


def test_a_missing_throughput_series_never_scales_down() -> None:
    # 4 replicas; 2 pods queue (10 waiting, 1.6 done/s), 2 just became ready with no series yet
    # (they count 0 in the throughput). Arrivals 3.2/s -> keep up 2 + drain 2 x 7/192 = 2.07:
    # below 4, but a missing series may have understated it: hold, never down
    ready = pods(2, 10, 8, 0.5, NOW, done=1.6) + (pod("new-a", 0, 0, 0.0, NOW), pod("new-b", 0, 0, 0.0, NOW))
    state = PolicyState(load_history=((NOW - 30, 36.0),), recommendations=((NOW - 700, 4),))
    d = run(obs(4, ready, free_gpus=8), state)
    assert d.values.queue_model == "rate"
    assert (d.desired_replicas, d.reason) == (4, Reason.HOLD_METRICS_UNHEALTHY)
    # with every series present the same reading scales down (window long past)
    full = pods(2, 10, 8, 0.5, NOW, done=1.6) + (pod("new-a", 0, 0, 0.0, NOW, done=0.0),
                                                 pod("new-b", 0, 0, 0.0, NOW, done=0.0))
    assert run(obs(4, full, free_gpus=8), state).desired_replicas < 4


def test_pods_just_ready_without_a_scrape_count_as_idle_for_scale_up() -> None:
    # 10 ready: 6 old ones run 160 each (960), 4 became ready 10 s ago and have no series yet.
    # Batch target 128. Standing the old pods in for the new ones would read 960 x 10 / 6 = 1,600
    # running -> 12.5 -> 13 replicas (the overshoot seen in the simulator). Counting the new ones
    # idle (HPA's rule for pods without metrics on a scale-up): 960 / 128 = 7.5 -> below 10, but
    # the new pods are unhealthy, so no scale-down either: hold at 10.
    params = PolicyParams(max_replicas=50, target_running_per_replica=128)
    young = PodStartup(created_at=NOW - 200, scheduled_at=NOW - 190, ready_at=NOW - 10)
    new = tuple(pod(f"new-{i}", None, None, None, NOW, startup=young) for i in range(4))
    d = run(obs(10, pods(6, 0, 160, 0.3, NOW) + new, free_gpus=8), None, params)
    assert d.values.running_total == pytest.approx(960.0)
    assert (d.desired_replicas, d.reason) == (10, Reason.HOLD_METRICS_UNHEALTHY)
    # the same four pods ready for 5 minutes without a series are a fault: extrapolated as before
    old = PodStartup(created_at=NOW - 600, scheduled_at=NOW - 590, ready_at=NOW - 300)
    lost = tuple(pod(f"new-{i}", None, None, None, NOW, startup=old) for i in range(4))
    d = run(obs(10, pods(6, 0, 160, 0.3, NOW) + lost, free_gpus=8), None, params)
    assert d.values.running_total == pytest.approx(1600.0)
    assert (d.desired_replicas, d.reason) == (13, Reason.SCALE_UP_BATCH)


def test_free_gpus_shorten_the_lead_time() -> None:
    lead_free = run(obs(2, pods(2, 15, 8, 0.95, NOW), free_gpus=8)).values.lead_time_seconds
    lead_none = run(obs(2, pods(2, 15, 8, 0.95, NOW), free_gpus=0)).values.lead_time_seconds
    assert (lead_free, lead_none) == (300.0, 600.0)


def test_learned_lead_time_is_used_and_kept_in_state() -> None:
    state = PolicyState(lead=LeadTimeState(model_load_samples=tuple((NOW - i, 120.0) for i in range(1, 4))))
    d, new_state = decide(P, obs(2, pods(2, 15, 8, 0.95, NOW), free_gpus=8), state, NOW)
    assert d.values.lead_time_seconds == 120.0 and d.values.lead_time_learned
    assert new_state.lead.model_load_samples == state.lead.model_load_samples


def test_decide_is_pure() -> None:
    o = obs(2, pods(2, 15, 8, 0.95, NOW), free_gpus=0)
    state = PolicyState()
    assert decide(P, o, state, NOW) == decide(P, o, state, NOW)
    assert state == PolicyState()


def test_scale_events_feed_the_next_tick() -> None:
    # 2 -> 6 (rate limit), then 15 s later the period restarts from 6
    params = PolicyParams(max_replicas=50)
    start = PolicyState(load_history=((NOW - 15, 0.0),))
    d1, s1 = decide(params, obs(2, pods(2, 100, 8, 0.99, NOW, done=1.6), free_gpus=0), start, NOW)
    assert d1.desired_replicas == 6
    d2, _ = decide(params, obs(6, pods(2, 120, 8, 0.99, NOW + 14, done=1.6)), s1, NOW + 14)
    assert d2.desired_replicas == 6 and d2.clamp is Clamp.SCALE_UP_RATE  # 4 added 14 s ago


def test_docstring_example_batch_model() -> None:
    # decide()'s worked example: no throughput series, so the batch model: (30 + 16) / (8 + 3) =
    # 4.18, at most 2 + 2 = 4; KV 1.9 / 0.8 = 2.375; 2 to add with no free GPU: 300 + 300 s
    d = run(obs(2, pods(2, 15, 8, 0.95, NOW), free_gpus=0))
    assert (d.desired_replicas, d.reason, d.clamp) == (4, Reason.SCALE_UP_QUEUE, None)
    assert (d.values.queue_replicas, d.values.lead_time_seconds) == (4.0, 600.0)
    assert d.values.kv_replicas == pytest.approx(2.375)
