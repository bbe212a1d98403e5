"""KEDA: External metric sum(waiting + running), AverageValue threshold, the HPA underneath."""

from __future__ import annotations

from autoscaler.baselines.keda import Keda
from tests.baselines.fleet import loading, pod, pods, view


def test_external_average_value_on_the_total() -> None:
    # 130 + 130 + 140 = 400 on 3 pods, threshold 78: 400 / 234 = 1.71 -> ceil(400 / 78) = 6
    # (the HPA allows max(2 x 3, 3 + 4) = 7)
    k = Keda(78.0)
    assert k.decide(view(3, [pod("a", 0, 130), pod("b", 0, 130), pod("c", 10, 130)]), 0.0) == 6
    assert k.last is not None and k.last.metric_replicas == 6


def test_loading_pods_count_in_the_status_replicas() -> None:
    # 3 ready at 100 + 1 loading: 300 / (78 x 4) = 0.96, within 10 % -> 4 (an HPA Pods metric would
    # average over the 3 with metrics and ask for more)
    assert Keda(78.0).decide(view(4, pods(3, waiting=0, running=100), loading(1)), 0.0) == 4


def test_an_empty_answer_reads_zero() -> None:
    # no pod scraped: sum() over no series is empty, ignoreNullValues -> 0 -> ceil(0) = 0: min 1
    # once the HPA's 300 s scale-down window has passed
    k = Keda(78.0)
    v = view(3, [pod("a", None), pod("b", None)])
    assert k.decide(v, 0.0) == 3 and k.decide(v, 300.0) == 1
    assert k.last is not None and k.last.metric_replicas == 0


def test_cached_metrics_refresh_every_polling_interval() -> None:
    # useCachedMetrics: the value polled at t = 0 (2 x 50 = 100: 100 / 156 = 0.64 -> ceil(100 / 78)
    # = 2) is served until t = 30, though the load rose to 2 x 300
    calm, busy = view(2, pods(2, waiting=0, running=50)), view(2, pods(2, waiting=0, running=300))
    cached = Keda(78.0, use_cached_metrics=True)
    assert cached.decide(calm, 0.0) == 2
    assert cached.decide(busy, 15.0) == 2  # still the t = 0 value: 100 / 156 -> 2
    assert cached.decide(busy, 30.0) == 6  # polled again: 600 / 156 = 3.8 -> ceil(600 / 78) = 8, limit max(4, 6)
    live = Keda(78.0)  # the default: queried on every HPA sync
    live.decide(calm, 0.0)
    assert live.decide(busy, 15.0) == 6
