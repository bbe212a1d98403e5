"""The `hpa-queue` baseline: the Kubernetes HPA algorithm, and replay reproducing its timeline."""

from __future__ import annotations

import pytest

from autoscaler.baselines.hpa import (
    HpaParams,
    HpaQueue,
    HpaState,
    hpa_decide,
    metric_replicas,
    parse_baseline,
)
from autoscaler.policy.types import (
    MetricSample,
    Observation,
    PodInFlight,
    PodStage,
    PodStartup,
    ReadyPod,
)
from autoscaler.replay.format import Recording
from autoscaler.replay.open_loop import replay
from autoscaler.replay.synthetic import diurnal_load, generate


def pods(*waiting: float | None) -> tuple[ReadyPod, ...]:
    return tuple(
        ReadyPod(f"p{i}", None if w is None else MetricSample(w, 0.0), None, None) for i, w in enumerate(waiting)
    )


def loading(n: int, stage: PodStage = PodStage.LOADING) -> tuple[PodInFlight, ...]:
    return tuple(PodInFlight(f"new{i}", stage, PodStartup(0.0)) for i in range(n))


@pytest.mark.parametrize(
    ("waiting", "in_flight", "expected"),
    [
        ((10, 10), (), 4),  # ratio 2 -> ceil(2 * 2)
        ((5.4, 5.4), (), 2),  # within 10 % tolerance
        ((0, 0, 0, 0), (), 0),  # ratio 0 -> 0 (minReplicas applies later)
        ((6, 6, 6), (), 4),  # ceil(1.2 * 3) = 4
        # a missing pod on a scale-up counts 0: 20/5 = 4 > 1, re-run (20+0)/2/5 = 2 -> ceil(2 * 2) = 4
        ((20, None), (), 4),
    ],
)
def test_metric_replicas_plain(waiting: tuple[float | None, ...], in_flight: tuple[PodInFlight, ...], expected: int) -> None:
    obs = Observation(spec_replicas=len(waiting), ready_pods=pods(*waiting), pods_in_flight=in_flight)
    assert metric_replicas(HpaParams(), obs)[0] == expected


def test_unready_pods_count_zero_on_scale_up_and_missing_target_on_scale_down() -> None:
    # 2 pods with 15 waiting, 2 Pending pods: ratio 3 -> with the unready at 0: 30/4/5 = 1.5 -> ceil(1.5*4) = 6
    obs = Observation(spec_replicas=4, ready_pods=pods(15, 15), pods_in_flight=loading(2, PodStage.SCHEDULED))
    assert metric_replicas(HpaParams(), obs)[0] == 6
    # scale-down with a pod loading (no metric, "missing"): it counts as at target: (0 + 0 + 5)/3/5 = 0.33 -> 1
    obs = Observation(spec_replicas=3, ready_pods=pods(0, 0), pods_in_flight=loading(1))
    assert metric_replicas(HpaParams(), obs)[0] == 1
    # no pod with a metric: the HPA cannot compute, holds
    obs = Observation(spec_replicas=2, ready_pods=pods(None, None))
    d, _ = hpa_decide(HpaParams(), obs, HpaState(), 0.0)
    assert (d.desired_replicas, d.reason) == (2, "hold_metrics_unavailable")


def test_behavior_rate_limits_and_scale_down_window() -> None:
    params = HpaParams(max_replicas=100)
    state = HpaState()
    # 1 pod, 100 waiting: ratio 20 -> 20 wanted; +max(100 %, 4) per 15 s from 1 -> 5
    d, state = hpa_decide(params, Observation(1, pods(100)), state, 0.0)
    assert (d.desired_replicas, d.limit) == (5, "ScaleUpLimit")
    # the queue is gone: the 300 s window keeps the highest recommendation (20 -> capped by current)
    d, state = hpa_decide(params, Observation(5, pods(0, 0, 0, 0, 0)), state, 15.0)
    assert d.desired_replicas == 5 and d.reason == "hold_scale_down_window"
    for t in range(30, 286, 15):
        d, state = hpa_decide(params, Observation(5, pods(0, 0, 0, 0, 0)), state, float(t))
        assert d.desired_replicas == 5, t
    # the recommendations of t=0 leave the window (kept only strictly after now - 300 s)
    d, state = hpa_decide(params, Observation(5, pods(0, 0, 0, 0, 0)), state, 300.0)
    assert (d.desired_replicas, d.reason) == (1, "scale_down")


@pytest.mark.parametrize(
    ("target", "max_replicas", "seed", "load_seconds"),
    [(5.0, 10, 1, 60.0), (3.0, 20, 2, 120.0), (10.0, 8, 3, 30.0)],
)
def test_replaying_hpa_queue_reproduces_the_hpa_timeline(
    target: float, max_replicas: int, seed: int, load_seconds: float
) -> None:
    """A Deployment scaled closed-loop by an HPA (the model) over a made-up load; replaying
    the `hpa-queue` baseline with the same target over that recording gives the same
    replicas at every tick."""
    params = HpaParams(target_average_value=target, max_replicas=max_replicas)
    header, gen = generate(HpaQueue(params, name="hpa"), steps=3000, arrivals=diurnal_load(seed=seed, period=20_000),
                           service_rate=2.0, load_seconds=load_seconds)
    recording = Recording(header, tuple(gen))
    assert len({s.spec for s in recording.steps}) >= 4  # it did scale
    result = replay(recording, HpaQueue(parse_baseline(f"hpa-queue:target={target},max={max_replicas}") or params))
    assert [t.desired for t in result.ticks[:-1]] == [s.spec for s in recording.steps[1:]]
    assert result.summary(15, 1)["ticks_differing"] == 0


def test_hpa_sync_wraps_any_metric_proposal() -> None:
    """`hpa_sync` is reconcileAutoscaler around a metric: bounds first (the metric is not even
    read), an unusable metric holds, a proposal goes through the behavior (here +100 %/+4 per 15 s)."""
    from autoscaler.baselines.hpa import hpa_sync

    params = HpaParams(max_replicas=10)
    calls: list[int] = []

    def propose(n: int | None) -> tuple[int | None, float | None]:
        calls.append(1)
        return n, None

    d, _ = hpa_sync(params, 12, lambda: propose(3), HpaState(), 0.0)
    assert (d.desired_replicas, d.reason, calls) == (10, "scale_down_max_replicas", [])
    d, st = hpa_sync(params, 2, lambda: propose(None), HpaState(), 0.0)
    assert (d.desired_replicas, d.reason, st) == (2, "hold_metrics_unavailable", HpaState())
    d, _ = hpa_sync(params, 2, lambda: propose(9), HpaState(), 0.0)
    assert (d.desired_replicas, d.limit) == (6, "ScaleUpLimit")  # max(2 x 2, 2 + 4) = 6
