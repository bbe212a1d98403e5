"""llm-d WVA saturation V2: token demand vs capacity min(k1, k2), thresholds 0.85 / 0.70, and the
HPA that actuates it (External AverageValue 1, 10 % tolerance, 10 pods per 15 s)."""

from __future__ import annotations

import pytest

from autoscaler.baselines.wva import Wva, pod_demand
from tests.baselines.fleet import loading, pod, pods, view


def test_pod_demand_adds_the_kv_the_waiting_requests_bring() -> None:
    # KV 0.7 held by 10 running (0.07 each) + 1 waiting -> 0.77; nothing running: the KV alone
    assert pod_demand(pod("a", 1, 10, 0.7)) == pytest.approx(0.77)
    assert pod_demand(pod("a", 3, 0, 0.2)) == pytest.approx(0.2)


@pytest.mark.parametrize(("ready", "flight", "kv_threshold", "expected"), [
    # 4 x 0.77 = 3.08; k1 0.8, no queue >= 5: k2 = k1; required 3.08 / 0.85 - 4 x 0.8 = 0.42 -> 4 + 1
    (pods(4, waiting=1, running=10, kv=0.7), (), 0.8, 5),
    # the same with a loading pod: anticipated supply 5 x 0.8 = 4 > 3.62; spare 3.2 - 3.08 / 0.7 < 0: hold 5
    (pods(4, waiting=1, running=10, kv=0.7), loading(1), 0.8, 5),
    # 4 x 0.2 = 0.8: spare 3.2 - 0.8 / 0.7 = 2.06 -> floor(2.06 / 0.8) = 2 fewer: 2
    (pods(4, waiting=0, running=10, kv=0.2), (), 0.8, 2),
    # one pod queues 6 at KV 0.6: k2 observed 0.6 < k1 0.8, the others take the average 0.6; demand
    # 0.96 + 0.6 + 0.6 = 2.16; required 2.16 / 0.85 - 3 x 0.6 = 0.74 -> + ceil(1.24) = 2: 5
    ([pod("a", 6, 10, 0.6), pod("b", 0, 10, 0.6), pod("c", 0, 10, 0.6)], (), 0.8, 5),
    # the same at kvCacheThreshold 0.5: k1 0.5 binds; 2.54 - 1.5 = 1.04 -> + ceil(2.08) = 3: 6
    ([pod("a", 6, 10, 0.6), pod("b", 0, 10, 0.6), pod("c", 0, 10, 0.6)], (), 0.5, 6),
])
def test_analysis(ready: list, flight: tuple, kv_threshold: float, expected: int) -> None:  # type: ignore[type-arg]
    assert Wva(kv_threshold=kv_threshold).analyze(view(len(ready) + len(flight), ready, flight)) == expected


def test_the_hpa_follows_outside_its_tolerance() -> None:
    # wanted 5 on 4 pods: 5 / 4 = 1.25 > 1.1 -> 5
    w = Wva()
    assert w.decide(view(4, pods(4, waiting=1, running=10, kv=0.7)), 0.0) == 5
    # 20 pods at KV 0.7, 10 running: 14 / 0.85 - 16 = 0.47 -> wanted 21; the HPA: 21 / 20 = 1.05,
    # within 10 %: it stays at 20
    w2 = Wva()
    assert w2.decide(view(20, pods(20, waiting=0, running=10, kv=0.7)), 0.0) == 20
    assert w2.wanted == 21


def test_the_analysis_runs_every_60_s() -> None:
    # t = 0: quiet, wanted 2 (see the scale-down case); t = 15..45 the load is high but WVA has not
    # looked again: the HPA keeps reading 2; t = 60: a new analysis
    w = Wva()
    busy = view(2, pods(2, waiting=1, running=10, kv=0.7))
    assert w.decide(view(4, pods(4, waiting=0, running=10, kv=0.2)), 0.0) == 2
    assert w.decide(busy, 15.0) == 2 and w.decide(busy, 45.0) == 2
    assert w.decide(busy, 60.0) == 3  # 1.54 / 0.85 - 1.6 = 0.21 -> + 1
