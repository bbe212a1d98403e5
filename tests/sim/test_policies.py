"""Each baseline's reaction on a tiny synthetic fleet, with the arithmetic in comments."""

from __future__ import annotations

from autoscaler.baselines.aibrix import AibrixApa
from autoscaler.baselines.hpa import HpaParams, HpaQueue
from autoscaler.baselines.hpa_cpu import HpaCpu
from autoscaler.baselines.keda import Keda
from autoscaler.baselines.kpa import Kpa
from autoscaler.baselines.queue_lead import QueueLead
from autoscaler.baselines.ray_serve import RayServe
from autoscaler.baselines.static import StaticPeak
from autoscaler.baselines.view import ClusterView, InFlightPod, PodMetrics
from autoscaler.baselines.wva import Wva
from autoscaler.policy.types import PodStage
from autoscaler.sim.policies import make_policy


def pod(name: str, waiting: float | None = 0.0, running: float = 8.0, kv: float = 0.5, out: int = 0,
        rate: float | None = None) -> PodMetrics:
    return PodMetrics(name=name, waiting=waiting, running=running if waiting is not None else None,
                      kv=kv if waiting is not None else None, sample_t=100.0 if waiting is not None else None,
                      completed_per_second=rate, outstanding_now=out, created=-200.0, scheduled=-190.0, ready=-100.0)


def view(spec: int, ready: list[PodMetrics], flight: tuple[InFlightPod, ...] = (), free: int = 0) -> ClusterView:
    return ClusterView(spec, tuple(ready), flight, free, 0)


def hpa(target: float, min_replicas: int = 1) -> HpaQueue:
    return HpaQueue(HpaParams(target_average_value=target, min_replicas=min_replicas, max_replicas=100))


def test_hpa_queue_pods_metric() -> None:
    # waiting 12 and 8, target 5: ratio (20 / 2) / 5 = 2.0 -> ceil(2.0 * 2) = 4
    assert hpa(5.0).decide(view(2, [pod("a", 12), pod("b", 8)]), 100.0) == 4
    # 4.6 and 5.2 waiting: ratio 0.98, within 10 %: hold
    assert hpa(5.0).decide(view(2, [pod("a", 4.6), pod("b", 5.2)]), 100.0) == 2
    # a loading pod is "missing": counted as 0 on a scale-up: (12 + 8 + 0) / 3 / 5 = 1.33 -> ceil(4) = 4
    loading = (InFlightPod("c", PodStage.LOADING, 50.0, 60.0),)
    assert hpa(5.0).decide(view(3, [pod("a", 12), pod("b", 8)], loading), 100.0) == 4


def test_hpa_queue_counts_pending_pods_as_zero_on_a_scale_up() -> None:
    # HPA's groupPods: a Pending pod (unschedulable) is "unready". 2 ready pods waiting 6 and 6,
    # 3 pending, spec 5: ratio 12 / 2 / 5 = 1.2 > 1.1 asks to scale up; with the pending pods as 0
    # (12 + 0 + 0 + 0 + 0) / 5 / 5 = 0.48 < 1: the direction flips, so HPA keeps 5. (Ignoring the
    # pending pods instead, as this baseline once did, proposes ceil(1.2 * 2) = 3 and scales
    # down to 3 once the 300 s window has passed.)
    pending = tuple(InFlightPod(n, PodStage.UNSCHEDULABLE, 50.0, None) for n in "cde")
    v = view(5, [pod("a", 6), pod("b", 6)], pending)
    h = hpa(5.0)
    assert h.decide(v, 0.0) == 5
    assert h.decide(v, 300.0) == 5
    assert h.last is not None and h.last.metric_replicas == 5
    # a clear scale-up still goes through: 12 + 8 on 2 ready, 1 pending: (20 + 0) / 3 / 5 = 1.33
    # -> ceil(1.33 * 3) = 4
    h2 = hpa(5.0)
    assert h2.decide(view(3, [pod("a", 12), pod("b", 8)], pending[:1]), 0.0) == 4


def test_keda_reads_an_empty_answer_as_zero() -> None:
    # no ready pod scraped yet: sum() over no series is empty, ignoreNullValues -> 0 -> ceil(0) = 0,
    # raised to min 1 and held by the 300 s scale-down window like any scale-down
    k = Keda(5.0)
    v = view(3, [pod("a", None), pod("b", None)])
    assert k.decide(v, 0.0) == 3
    assert k.decide(v, 300.0) == 1  # (holding on an empty answer, as this baseline once did, kept 3)
    assert k.last is not None and k.last.metric_replicas == 0


def test_hpa_queue_scales_to_min_on_an_empty_queue_after_the_window() -> None:
    h = hpa(5.0, min_replicas=1)
    v = view(4, [pod(n, 0) for n in "abcd"])
    assert h.decide(v, 0.0) == 4  # ratio 0 -> 1 replica, held by the 300 s scale-down window
    assert h.decide(v, 299.0) == 4
    assert h.decide(v, 300.0) == 1  # the window's only 4 is now 300 s old: down to min (-100 %/15 s)


def test_keda_external_average_value() -> None:
    # 3 replicas, 40 waiting: 40 / (5 * 3) = 2.67 > 1.1 -> ceil(40 / 5) = 8
    assert Keda(5.0).decide(view(3, [pod("a", 20), pod("b", 10), pod("c", 10)]), 0.0) == 7  # HPA: 3 -> max(6, 3+4) = 7 first
    k = Keda(5.0)
    v = view(3, [pod("a", 20), pod("b", 10), pod("c", 10)])
    k.decide(v, 0.0)
    assert k.decide(view(7, v.ready), 15.0) == 8  # next period: the rest


def test_hpa_cpu_never_scales() -> None:
    assert HpaCpu(1).decide(view(5, [pod("a", 100)]), 0.0) == 1


def test_kpa_panics_on_a_burst() -> None:
    # target 100 * 0.7 = 70; 700 in flight on 4 pods: ceil(700 / 70) = 10 >= 2 * 4 -> panic, 10
    k = Kpa(100.0)
    ready = [pod(n, out=175) for n in "abcd"]
    assert k.decide(view(4, ready), 0.0) == 10
    # load halves 2 s later: still panicking, never below the panic maximum
    assert k.decide(view(10, [pod(n, out=35) for n in "abcd"]), 2.0) == 10


def test_aibrix_apa_doubles_at_most_and_waits_to_scale_down() -> None:
    # 4 pods at KV 0.9, target 0.5: ratio 1.8 -> min(ceil(1.8 * 4) = 8, 2 * 4 = 8) = 8
    a = AibrixApa(0.5)
    assert a.decide(view(4, [pod(n, kv=0.9) for n in "abcd"]), 0.0) == 8
    low = view(8, [pod(n, kv=0.1) for n in "abcdefgh"])
    assert a.decide(low, 100.0) == 8  # inside the 300 s cooldown
    # ratio 0.2 -> max(floor(8 / 2), ceil(0.2 * 8)) = 4
    assert a.decide(low, 300.0) == 4


def test_wva_adds_one_and_holds_while_pending() -> None:
    w = Wva()
    # mean KV 0.75: spare 0.8 - 0.75 = 0.05 < 0.1 -> +1
    assert w.decide(view(4, [pod(n, kv=0.75) for n in "abcd"]), 0.0) == 5
    pending = (InFlightPod("e", PodStage.UNSCHEDULABLE, 0.0, None),)
    assert w.decide(view(5, [pod(n, kv=0.75) for n in "abcd"], pending), 60.0) == 5
    # mean KV 0.2, no queue: with 3 pods KV 0.27, spare 0.53 >= 0.1 and queue spare 5 >= 3 -> -1
    assert w.decide(view(4, [pod(n, kv=0.2) for n in "abcd"]), 120.0) == 3
    # docstring: KV 0.75, 0.5, 0.5, 0.9 (saturated): spare over the other three 0.217 -> no +1;
    # their load 0.583 x 3 / 2 = 0.875 leaves spare -0.075 < 0.1 -> no -1: hold at 4
    mixed = [pod("a", kv=0.75), pod("b", kv=0.5), pod("c", kv=0.5), pod("d", kv=0.9)]
    assert w.decide(view(4, mixed), 180.0) == 4
    # every replica saturated (queue >= 5): no spare at all -> +1
    assert w.decide(view(2, [pod("a", waiting=6), pod("b", waiting=9)]), 240.0) == 3
    # spec 5 but only 4 pods report (one not ready yet): in transition, hold
    assert w.decide(view(5, [pod(n, kv=0.75) for n in "abcd"]), 300.0) == 5


def test_ray_waits_upscale_delay() -> None:
    # target 64, 4 replicas with 128 ongoing each: ceil(4 * 512 / (64 * 4)) = 8, after 30 s
    r = RayServe(64.0)
    v = view(4, [pod(n, out=128) for n in "abcd"])
    outs = [r.decide(v, float(t)) for t in range(32)]
    assert outs[29] == 4 and outs[30] == 8


def test_static_peak() -> None:
    assert StaticPeak(7).decide(view(3, []), 0.0) == 7
    assert getattr(make_policy("static-peak", 1.25, 1, 100, peak_need=8), "replicas") == 10  # ceil(1.25 * 8)


def test_queue_lead_drives_the_decision_core() -> None:
    # 2 ready pods with 15 waiting, 8 running, KV 0.95, no free GPU, no throughput series (batch
    # model): (30 + 16) / (8 + 3) = 4.18, capped at one more replica per pod queued above target
    # (2 + 2 = 4); KV 1.9 / 0.8 = 2.4 -> 4 replicas
    q = make_policy("queue-lead", 0.8, 1, 10)
    assert isinstance(q, QueueLead)
    assert q.decide(view(2, [pod("a", 15, 8, 0.95), pod("b", 15, 8, 0.95)]), 100.0) == 4
    assert q.last is not None and q.last.reason.value == "scale_up_queue"


def test_queue_lead_knob_can_be_the_batch_target() -> None:
    q = make_policy("queue-lead", 64.0, 1, 10, {"target_running_per_replica": 96}, queue_lead_knob="target_running_per_replica")
    assert isinstance(q, QueueLead)
    assert q.params.target_running_per_replica == 64.0 and q.params.target_kv_cache_usage_ratio == 0.8
    d = make_policy("queue-lead", None, 1, 10, {"target_running_per_replica": 96}, queue_lead_knob="target_running_per_replica")
    assert isinstance(d, QueueLead) and d.params.target_running_per_replica == 96
    k = make_policy("queue-lead", 0.5, 1, 10, {"target_running_per_replica": 96})
    assert isinstance(k, QueueLead) and k.params.target_kv_cache_usage_ratio == 0.5
