"""A burst through decide(): the queue drives a scale-up ahead of the lead time, pods in
flight are counted, and the replicas do not cascade while they load.

The fleet is `fluid.Fleet`: per-pod queues (vLLM queues per engine), a least-outstanding
router, a 300 s lead time. 2 replicas serve 1.6 req/s; at tick 10 the arrivals jump to
12 req/s (7.5 full replicas' worth) for 90 ticks, then fall back.
"""

from __future__ import annotations

import math

from autoscaler.policy import Decision, PolicyParams, PolicyState, Reason, decide

from .fluid import Fleet

TICK = 15.0
START = 100_000.0
PARAMS = PolicyParams(max_replicas=64, model_load_seconds_default=300, node_provision_seconds_default=0)


def run_burst(
    params: PolicyParams, throughput: bool = True, new_pod_waiting: list[float] | None = None
) -> tuple[list[Decision], Fleet, int]:
    """Run 40 minutes; `new_pod_waiting` collects, per tick, the longest queue of a pod that
    joined after the start (the first two pods keep the backlog they had, as vLLM does)."""
    fleet = Fleet(ready=2, report_throughput=throughput)
    before, burst = 1.6, 12.0
    needed = math.ceil(burst / fleet.capacity_per_second(1))  # 12 / 1.6 = 7.5 -> 8
    fleet.in_system = [16.0, 16.0]
    state = PolicyState()
    log: list[Decision] = []
    for i in range(160):  # 40 minutes
        now = START + i * TICK
        fleet.step(now, TICK, burst if 10 <= i < 100 else before)
        decision, state = decide(params, fleet.observe(now), state, now)
        log.append(decision)
        if new_pod_waiting is not None:
            new_pod_waiting.append(max((max(0.0, n - fleet.batch) for n in fleet.in_system[2:]), default=0.0))
        fleet.scale_to(decision.desired_replicas, now)
    return log, fleet, needed


def hpa_average_value_on_waiting(target: float = 5.0) -> list[int]:
    """HPA v2 with an AverageValue target on vllm:num_requests_waiting (the usual recipe):
    desired = ceil(sum(waiting) / target), +100 % or +4 per 15 s, on the same fleet."""
    fleet = Fleet(ready=2)
    fleet.in_system = [16.0, 16.0]
    replicas: list[int] = []
    for i in range(60):
        now = START + i * TICK
        fleet.step(now, TICK, 12.0 if i >= 10 else 1.6)
        desired = max(fleet.spec, math.ceil(fleet.waiting / target))
        desired = min(desired, max(2 * fleet.spec, fleet.spec + 4), 64)
        fleet.scale_to(desired, now)
        replicas.append(desired)
    return replicas


def test_burst_scales_ahead_and_does_not_cascade() -> None:
    new_pod_waiting: list[float] = []
    log, fleet, needed = run_burst(PARAMS, new_pod_waiting=new_pod_waiting)
    ups = [d for d in log if d.direction == "up"]
    peak = max(d.desired_replicas for d in log)

    # the first reaction comes on the first burst tick, from the queue, with the lead time
    assert log.index(ups[0]) == 10
    assert ups[0].reason in (Reason.SCALE_UP_QUEUE, Reason.SCALE_UP_FORECAST)
    assert ups[0].values.queue_model == "rate" and ups[0].values.lead_time_seconds == 300.0
    # while pods load they are counted; a higher reading waits for them
    held = [d for d in log if d.reason is Reason.HOLD_CAPACITY_IN_FLIGHT]
    assert held and all(d.values.pods_in_flight > 0 for d in held)
    # no cascade: at most 2x the 8 replicas the arrival rate needs; after the first steps
    # (up to the plan), the rest are single pods following the demand measured now
    assert peak <= 2 * needed, [d.desired_replicas for d in log]
    assert len(ups) <= 8, [(d.desired_replicas, d.reason.value) for d in ups]
    late = [d for d in ups if d.values.pods_in_flight > 0 and d.current_replicas >= needed]
    assert all(d.desired_replicas - d.current_replicas <= 2 for d in late), [
        (d.current_replicas, d.desired_replicas) for d in late
    ]
    # the arrival rate was estimated right once the window held only the burst
    assert abs(log[40].values.arrivals_per_second - 12.0) < 0.5  # type: ignore[operator]
    # the capacity kept up: once the pods of the burst are ready (tick 45 on), the pods that
    # joined never queue more than the target of 3
    assert max(new_pod_waiting[45:100]) <= 3.0, new_pod_waiting[45:100]
    # no scale-down while the burst lasts; afterwards at most 1 pod per 120 s
    downs = [i for i, d in enumerate(log) if d.direction == "down"]
    assert all(i >= 10 + 600 / TICK for i in downs)
    assert all(b - a >= 120 / TICK for a, b in zip(downs, downs[1:]))


def test_hpa_on_waiting_cascades_where_we_do_not() -> None:
    """The usual HPA recipe on the same burst chases the backlog piling up on the 2 old
    pods while new ones load: it ends at the max. Ours stays within 2x the need."""
    hpa = hpa_average_value_on_waiting()
    ours, _, needed = run_burst(PARAMS)
    assert max(hpa) == 64
    assert max(d.desired_replicas for d in ours) <= 2 * needed < max(hpa)


def test_without_throughput_the_batch_model_does_not_run_away() -> None:
    """No vllm:request_success_total: the batch model cannot tell backlog from arrivals, so
    its demand at most doubles (one replica per queued pod), times the forecast's 1.5 at most:
    slower to settle than the rate model, but no runaway to the max."""
    log, _, _ = run_burst(PARAMS, throughput=False)
    ups = [d for d in log if d.direction == "up"]
    assert all(d.values.queue_model in ("batch", "none") for d in log)
    assert all(d.desired_replicas <= 3 * d.current_replicas for d in ups)
    assert max(d.desired_replicas for d in log) < 64
