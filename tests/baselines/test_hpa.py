"""The HPA baselines, rule by rule, with the arithmetic in comments (as kubernetes'
replica_calculator_test.go / horizontal_test.go do): `hpa` (Pods metric waiting + running,
AverageValue), the replay's `hpa-queue` (waiting alone) and `hpa-waiting` (production-stack's
Object metric with a Value target)."""

from __future__ import annotations

import pytest

from autoscaler.baselines.hpa import HpaParams, HpaQueue, external_average_value_replicas, object_value_replicas
from autoscaler.baselines.hpa_waiting import HpaWaiting
from tests.baselines.fleet import loading, pending, pod, pods, view

WR = ("waiting", "running")


def hpa(target: float, metric: tuple[str, ...] = WR, min_replicas: int = 1) -> HpaQueue:
    return HpaQueue(HpaParams(target_average_value=target, min_replicas=min_replicas, max_replicas=100, metric=metric))


@pytest.mark.parametrize(("spec", "ready", "flight", "expected"), [
    # (10 + 150) + (0 + 100) = 260 on 2 pods: 130 / 78 = 1.67 -> ceil(1.67 x 2) = 4 (limit max(2x2, 2+4) = 6)
    (2, [pod("a", 10, 150), pod("b", 0, 100)], (), 4),
    # 80 and 76: 78 / 78 = 1.0, within 10 %: hold
    (2, [pod("a", 0, 80), pod("b", 0, 76)], (), 2),
    # 84 and 84: 84 / 78 = 1.077 <= 1.1: hold
    (2, [pod("a", 4, 80), pod("b", 4, 80)], (), 2),
    # a loading pod has no metric ("missing"), on a scale-up it counts as 0:
    # 130 / 78 = 1.67 > 1; (130 + 130 + 0) / 3 = 86.666 / 78 = 1.111 > 1.1 -> ceil(1.111 x 3) = 4
    (3, [pod("a", 0, 130), pod("b", 0, 130)], loading(1), 4),
    # the same with usage 120 per ready pod: (240 + 0) / 3 = 80 / 78 = 1.026, within tolerance: hold 3
    (3, [pod("a", 0, 120), pod("b", 0, 120)], loading(1), 3),
    # every pod busy, none waiting: 200 / 78 = 2.56 -> ceil(2.56 x 2) = 6 (limit 6)
    (2, [pod("a", 0, 200), pod("b", 0, 200)], (), 6),
])
def test_hpa_on_waiting_plus_running(spec: int, ready: list, flight: tuple, expected: int) -> None:  # type: ignore[type-arg]
    assert hpa(78.0).decide(view(spec, ready, flight), 100.0) == expected


def test_waiting_alone_sees_nothing_until_a_replica_saturates() -> None:
    # 2 pods running 200 each, 0 waiting: on waiting alone the ratio is 0 -> 1 replica once the
    # 300 s scale-down window has passed; on waiting + running it scales up to 6 (previous test)
    h = hpa(5.0, metric=("waiting",))
    v = view(2, [pod("a", 0, 200), pod("b", 0, 200)])
    assert h.decide(v, 0.0) == 2  # the window's first recommendation is the current 2
    assert h.decide(v, 300.0) == 1
    assert h.last is not None and h.last.metric_replicas == 0


def test_pending_pods_count_as_zero_on_a_scale_up() -> None:
    # groupPods: an unschedulable pod is "unready". waiting 6 and 6 on 2 ready, 3 pending, spec 5,
    # target 5: 12 / 2 / 5 = 1.2 asks to scale up; with the pending as 0: 12 / 5 / 5 = 0.48 < 1,
    # the direction flips -> keep 5 (now and after the 300 s window)
    h = hpa(5.0, metric=("waiting",))
    v = view(5, [pod("a", 6), pod("b", 6)], pending(3))
    assert h.decide(v, 0.0) == 5 and h.decide(v, 300.0) == 5
    assert h.last is not None and h.last.metric_replicas == 5


def test_scale_down_waits_out_the_stabilization_window_then_goes_to_min() -> None:
    h = hpa(78.0, min_replicas=1)
    v = view(4, pods(4, waiting=0, running=0))
    assert h.decide(v, 0.0) == 4  # ratio 0 -> 1, but the window holds the 4 it started with
    assert h.decide(v, 299.0) == 4
    assert h.decide(v, 300.0) == 1  # the 4 is now 300 s old; -100 % per 15 s allows 1


def test_scale_up_rate_limit_and_the_next_period() -> None:
    # 1 pod at 2000: ceil(2000 / 78) = 26, but up max(+100 %, +4 pods) per 15 s: 1 -> 5, then
    # 5 -> 10 and 10 -> 20 in the next periods (events older than 15 s no longer count)
    h = hpa(78.0)
    assert h.decide(view(1, [pod("a", 1000, 1000)]), 0.0) == 5
    assert h.decide(view(5, [pod("a", 1000, 1000)], loading(4)), 15.0) == 10
    assert h.last is not None and h.last.limit == "ScaleUpLimit"


@pytest.mark.parametrize(("current", "usage", "target", "ready", "expected"), [
    (2, 6.0, 1.0, 2, 12),   # ratio 6 -> ceil(6 x 2)
    (2, 1.05, 1.0, 2, 2),   # ratio 1.05, within 10 %
    (4, 0.0, 1.0, 4, 0),    # ratio 0 -> ceil(0 x 4) = 0 (min replicas apply later)
    (3, 5.0, 4.0, 2, 3),    # ratio 1.25 -> ceil(1.25 x 2) = 3: the READY pods, not the 3 replicas
    (0, 2.5, 1.0, 0, 3),    # from 0 replicas: ceil(ratio)
])
def test_object_value_arithmetic(current: int, usage: float, target: float, ready: int, expected: int) -> None:
    assert object_value_replicas(current, usage, target, ready, 0.1) == expected


@pytest.mark.parametrize(("status", "usage", "target", "expected"), [
    (3, 400.0, 78.0, 6),   # 400 / (78 x 3) = 1.71 > 1.1 -> ceil(400 / 78) = 6
    (4, 300.0, 78.0, 4),   # 300 / 312 = 0.96, within 10 % -> status replicas 4
    (4, 0.0, 78.0, 0),     # 0 -> ceil(0) = 0
    (0, 100.0, 78.0, 2),   # no pod: ceil(100 / 78) = 2
])
def test_external_average_value_arithmetic(status: int, usage: float, target: float, expected: int) -> None:
    assert external_average_value_replicas(status, usage, target, 0.1)[0] == expected


def test_hpa_waiting_runs_away_once_a_queue_forms() -> None:
    # production-stack's example: Value 1 on the namespace's total waiting. 3 + 3 waiting on 2 ready:
    # ratio 6 -> ceil(6 x 2) = 12, rate-limited to max(2 x 2, 2 + 4) = 6
    h = HpaWaiting(1.0)
    assert h.decide(view(2, [pod("a", 3), pod("b", 3)]), 0.0) == 6
    # 15 s later, 6 ready and still 6 waiting: ceil(6 x 6) = 36, limited to max(12, 10) = 12
    assert h.decide(view(6, [pod(f"p{i}", 1) for i in range(6)]), 15.0) == 12


def test_hpa_waiting_holds_near_target_and_without_metrics() -> None:
    # 0.55 + 0.5 = 1.05 waiting: ratio 1.05, within tolerance -> hold 2
    assert HpaWaiting(1.0).decide(view(2, [pod("a", 0.55), pod("b", 0.5)]), 0.0) == 2
    # no pod scraped yet: the adapter has no value, the HPA does not scale
    h = HpaWaiting(1.0)
    assert h.decide(view(3, [pod("a", None), pod("b", None)]), 0.0) == 3
    assert h.last is not None and h.last.reason == "hold_metrics_unavailable"


def test_hpa_waiting_sits_at_min_while_nothing_waits() -> None:
    # 4 pods running 300 each, nothing waiting: ratio 0 -> 0, the window holds 4 for 300 s, then min 1
    h = HpaWaiting(1.0)
    v = view(4, pods(4, waiting=0, running=300))
    assert h.decide(v, 0.0) == 4 and h.decide(v, 300.0) == 1
