"""Knative KPA with containerConcurrency: target 70 % of CC, panic, rate limits, scale-down delay."""

from __future__ import annotations

import pytest

from autoscaler.baselines.kpa import Kpa
from tests.baselines.fleet import pods, view


def run(k: Kpa, loads: dict[float, int], ready: int, until: float, router: int = 0) -> dict[float, int]:
    """Decide every 2 s from 0 to `until` with `ready` pods; total concurrency from `loads`
    (time -> in flight per pod, held until the next entry)."""
    out: dict[float, int] = {}
    per_pod = 0
    t = 0.0
    while t <= until:
        per_pod = loads.get(t, per_pod)
        out[t] = k.decide(view(ready, pods(ready, out=per_pod), router=router), t)
        t += 2.0
    return out


def test_containerconcurrency_is_the_pod_limit_and_70_percent_the_target() -> None:
    k = Kpa(100.0)
    assert k.pod_concurrency_limit == 100 and k.target == pytest.approx(70.0)


def test_soft_target_has_no_pod_limit_and_the_same_70_percent() -> None:
    # containerConcurrency 0, autoscaling.knative.dev/target 100: target 70 per pod, nothing held at the
    # activator; 700 in flight on 4 pods -> 10 (panic), as with the hard limit
    k = Kpa(100.0, hard_limit=False, scale_down_delay_s=0.0)
    assert k.pod_concurrency_limit is None and k.target == pytest.approx(70.0) and k.name == "kpa-soft"
    assert k.decide(view(4, pods(4, out=175)), 0.0) == 10


@pytest.mark.parametrize(("per_pod", "ready", "router", "expected"), [
    (175, 4, 0, 10),  # 700 / 70 = 10 >= 2 x 4: panic, 10
    (100, 4, 200, 9),  # 4 pods at the limit + 200 at the activator: 600 / 70 = 8.6 -> 9 >= 8: panic, 9
    (70, 4, 0, 4),  # 280 / 70 = 4: no change
    (10, 4, 0, 2),  # 40 / 70 -> 1, but at most halved per decision: floor(4 / 2) = 2
    (2000, 1, 0, 29),  # 2000 / 70 = 28.6 -> 29, within ceil(1000 x 1); 29 >= 2 x 1: panic
])
def test_first_decision(per_pod: int, ready: int, router: int, expected: int) -> None:
    k = Kpa(100.0, scale_down_delay_s=0.0)
    assert k.decide(view(ready, pods(ready, out=per_pod), router=router), 0.0) == expected


def test_panic_never_scales_down_until_a_stable_window_without_a_surge() -> None:
    # 700 on 4 pods at t = 0: panic at 10. From t = 2 the load is 348. Each sample counts from its
    # time to the next, so the 6 s panic average is 700 at t = 2 (panic tick), (700 x 2 + 348 x 2) / 4
    # = 524 -> 8 >= 2 x 4 at t = 4 (the last panic tick), 465 -> 7 < 8 at t = 6. Panic never scales
    # down and lasts until 60 s after its last tick: 10 through t = 64, then the stable average
    # 348 / 70 -> 5 at t = 66.
    k = Kpa(100.0, scale_down_delay_s=0.0)
    out = run(k, {0.0: 175, 2.0: 87}, ready=4, until=70.0)
    assert out[0.0] == 10 and out[2.0] == 10 and out[64.0] == 10
    assert out[66.0] == 5


def test_scale_down_delay_keeps_the_highest_desire_of_the_last_300_s() -> None:
    # 280 in flight at t = 0, 68 from t = 2 on. Desires: t = 0 and 2: 280 / 70 = 4; t = 4: stable
    # average (280 x 2 + 68 x 2) / 4 = 174 -> 3; t = 6: 139 -> 2; later ~68 -> 1, at most halved: 2.
    # Without the delay: 2 from t = 6. With the 300 s delay, the highest desire of (t - 300, t]:
    # 4 through t = 300 (the 4 of t = 2), 3 at t = 302, 2 from t = 304.
    loads = {0.0: 70, 2.0: 17}
    fast = run(Kpa(100.0, scale_down_delay_s=0.0), loads, ready=4, until=400.0)
    slow = run(Kpa(100.0), loads, ready=4, until=400.0)
    assert fast[4.0] == 3 and fast[6.0] == 2 and fast[300.0] == 2
    assert slow[6.0] == 4 and slow[300.0] == 4 and slow[302.0] == 3 and slow[304.0] == 2
