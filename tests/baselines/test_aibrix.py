"""AIBrix APA: ratio to the KV target, 10 % tolerances, x2 / half per decision, 300 s cooldown."""

from __future__ import annotations

import pytest

from autoscaler.baselines.aibrix import AibrixApa, apa_replicas, pending_guard
from tests.baselines.fleet import loading, pods, view


@pytest.mark.parametrize(("current", "usage", "target", "expected"), [
    (4, 0.9, 0.5, 8),    # r 1.8 > 1.1: min(ceil(4 x 1.8) = 8, ceil(2 x 4) = 8)
    (4, 0.9, 0.3, 8),    # r 3.0: ceil(12) capped at 2 x 4 = 8
    (4, 0.54, 0.5, 4),   # r 1.08 <= 1.1: hold
    (4, 0.46, 0.5, 4),   # r 0.92 >= 0.9: hold
    (8, 0.1, 0.5, 4),    # r 0.2 < 0.9: max(ceil(1.6) = 2, floor(8 / 2) = 4)
    (8, 0.4, 0.5, 7),    # r 0.8: max(ceil(6.4) = 7, 4)
])
def test_apa_rule(current: int, usage: float, target: float, expected: int) -> None:
    assert apa_replicas(current, usage, target) == expected


def test_scale_down_waits_out_the_cooldown() -> None:
    # t = 0: 4 pods at KV 0.9 -> 8. Then 8 pods at KV 0.1, every 15 s: t = 15 the 30 s window
    # still averages (0.9 + 0.1) / 2 = 0.5 -> r 1 -> hold; from t = 30, r 0.2 recommends 4, but
    # the highest recommendation of the last 300 s is 8 (t = 0 and t = 15) until t = 315
    a = AibrixApa(0.5)
    assert a.decide(view(4, pods(4, kv=0.9)), 0.0) == 8
    low = view(8, pods(8, kv=0.1))
    out = {t: a.decide(low, float(t)) for t in range(15, 331, 15)}
    assert out[15] == 8 and out[30] == 8 and out[300] == 8 and out[315] == 4


def test_no_pod_reporting_holds() -> None:
    assert AibrixApa(0.5).decide(view(3, pods(2, waiting=None)), 0.0) == 3


@pytest.mark.parametrize(("current", "ready", "recommendation", "usage", "expected"), [
    (8, 4, 15, 0.9, 8),   # up: ceil(8 x (0.9 x 4 / 8) / 0.5) = ceil(7.2) = 8, within [N 8, 15]
    (8, 6, 15, 0.9, 11),  # up: ceil(8 x 0.675 / 0.5) = ceil(10.8) = 11
    (8, 4, 4, 0.1, 5),    # down: ceil(8 x ((0.1 x 4 + 0.5 x 4) / 8) / 0.5) = ceil(4.8) = 5, within [4, 8]
    (8, 8, 15, 0.9, 15),  # nothing pending: the recommendation
    (8, 4, 8, 0.9, 8),    # no change recommended: untouched
    (8, 0, 16, 0.9, 8),   # nothing ready: ceil(0) -> held at N
])
def test_pending_replica_guard(current: int, ready: int, recommendation: int, usage: float, expected: int) -> None:
    assert pending_guard(current, ready, recommendation, usage, 0.5) == expected


def test_scale_ups_do_not_compound_while_pods_load() -> None:
    # t = 0: 4 ready at KV 0.9 -> 8. t = 10: spec 8, 4 still loading, the ready ones still at 0.9:
    # unguarded r 1.8 would give min(ceil(14.4), 16) = 15; the guard counts the 4 loading pods as
    # missing: ceil(4 x 0.9 / 0.5) = 8 -> stays at 8. Once all 8 are ready at 0.9: 15.
    a = AibrixApa(0.5, window_s=1.0)
    assert a.decide(view(4, pods(4, kv=0.9)), 0.0) == 8
    assert a.decide(view(8, pods(4, kv=0.9), loading(4)), 10.0) == 8
    assert a.decide(view(8, pods(8, kv=0.9)), 20.0) == 15


def test_a_ready_pod_not_yet_scraped_is_still_pending_to_the_guard() -> None:
    # 8 spec replicas: 4 busy pods at KV 0.9, 4 just ready but not scraped yet (no gauge). The mean
    # holds the 4 busy ones only, so the guard counts the other 4 as pending: ceil(4 x 0.9 / 0.5)
    # = 8 -> stays at 8 (counting them as ready applied 0.9 to all 8: min(ceil(14.4), 16) = 15)
    a = AibrixApa(0.5, window_s=1.0)
    assert a.decide(view(8, pods(4, kv=0.9) + pods(4, waiting=None)), 0.0) == 8
