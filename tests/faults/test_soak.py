"""Soak: 24 simulated hours at 15 s ticks (5,760 ticks) of `decide()` against a fleet model,
with faults injected at random (fixed seed), and the invariants checked at every tick:

* never below min_replicas nor above max_replicas;
* never a scale-down on unhealthy data (a ready pod absent, stale or NaN/Inf; Prometheus down;
  no ready pod) nor during a rollout;
* never two scale-downs inside the step period (`scale_down_period_seconds`, 1 pod per 120 s);
* the decision log is complete: one JSON record per tick, with the reason, the clamp and every
  intermediate value (a tick where the cluster could not be listed says so).

The fleet is `tests/policy/fluid.py` (per-pod queues, least-outstanding routing, 300 s from
asking for a replica to its first request). The load is diurnal (a sinusoid between 2 and 14
req/s, a replica serving 1.6) plus random bursts. The faults are what the loop hands the core
when things break (see `autoscaler/controller/observe.py` and `autoscaler/controller/loop.py`): every ready pod
absent (Prometheus down or answering badly), some pods absent, stale samples, NaN or +Inf
values, a readiness flap, a rollout, the cluster unreadable (no decision that tick), and a
failed scale patch (the decision is not carried out and leaves no scale event in the state,
through the controller's own `actuation.settle`).
"""

from __future__ import annotations

import json
import math
import random
import time
from collections import Counter
from dataclasses import replace
from typing import Any

import pytest

from autoscaler.controller.actuation import Outcome, settle
from autoscaler.policy import (
    MetricSample,
    Observation,
    PodInFlight,
    PodStage,
    PodStartup,
    PolicyParams,
    PolicyState,
    ReadyPod,
    decide,
)
from autoscaler.policy.health import assess_health
from tests.policy.fluid import Fleet

TICK = 15.0
TICKS = 24 * 3600 // int(TICK)  # 5,760
START = 1_700_000_000.0
SEED = 6
DEFAULTS = PolicyParams(min_replicas=2, max_replicas=16, model_load_seconds_default=300,
                        node_provision_seconds_default=0)
# a scale-down window as short as the step period: the controller scales down at many more
# ticks, so the faults stand between it and a scale-down more often (a window shorter than the
# period breaks the step limit: see the xfail at the end)
SHORT_WINDOW = DEFAULTS.model_copy(update={"scale_down_window_seconds": 120, "scale_down_window_lead_times": 0})
FAULTS = ("prometheus_down", "pods_absent", "stale", "nan", "inf", "flap", "rollout", "cluster_unreadable",
          "patch_failed")


def arrivals(t: float, bursts: list[tuple[float, float, float]]) -> float:
    """Requests/s at t seconds into the day: a diurnal sinusoid (2 at night, 14 at the peak)
    plus the bursts active at t."""
    base = 8.0 - 6.0 * math.cos(2 * math.pi * t / 86400.0)
    return base + sum(extra for start, end, extra in bursts if start <= t < end)


def inject(fault: str, obs: Observation, now: float, rng: random.Random) -> Observation:
    """The observation the loop would build while `fault` lasts."""
    pods = list(obs.ready_pods)
    if fault == "prometheus_down":  # build_observation(metrics=None): every ready pod absent
        pods = [ReadyPod(p.name, None, None, None, p.startup, None) for p in pods]
    elif fault == "pods_absent":
        for i in rng.sample(range(len(pods)), k=max(1, len(pods) // 3)):
            pods[i] = ReadyPod(pods[i].name, None, None, None, pods[i].startup, None)
    elif fault == "stale":  # the newest samples Prometheus has are 2 minutes old
        old = now - 120.0

        def aged(s: MetricSample | None) -> MetricSample | None:
            return MetricSample(s.value, old) if s is not None else None

        pods = [ReadyPod(p.name, aged(p.waiting), aged(p.running), aged(p.kv_cache_usage), p.startup,
                         aged(p.completed_per_second)) for p in pods]
    elif fault in ("nan", "inf"):
        bad = math.nan if fault == "nan" else math.inf
        i = rng.randrange(len(pods))
        sample = MetricSample(bad, now)
        field = rng.choice(["waiting", "running", "kv_cache_usage"])
        if field == "waiting":
            pods[i] = replace(pods[i], waiting=sample)
        elif field == "running":
            pods[i] = replace(pods[i], running=sample)
        else:
            pods[i] = replace(pods[i], kv_cache_usage=sample)
    elif fault == "flap":  # a ready pod fails its readiness probe: it is loading again
        i = rng.randrange(len(pods))
        gone = pods.pop(i)
        flight = (*obs.pods_in_flight, PodInFlight(gone.name, PodStage.LOADING,
                                                   PodStartup(created_at=now - 3600, scheduled_at=now - 3590)))
        return replace(obs, ready_pods=tuple(pods), pods_in_flight=flight)
    elif fault == "rollout":
        return replace(obs, rollout_in_progress=True)
    return replace(obs, ready_pods=tuple(pods))


@pytest.mark.parametrize(("params", "min_guarded"), [(DEFAULTS, 1), (SHORT_WINDOW, 3)],
                         ids=["defaults", "short-window"])
def test_soak_24h_with_random_faults(params: PolicyParams, min_guarded: int) -> None:
    started = time.perf_counter()
    rng = random.Random(SEED)
    fleet = Fleet(ready=2)
    state = PolicyState()
    bursts: list[tuple[float, float, float]] = []
    fault: str | None = None
    fault_left = 0
    log: list[str] = []
    scale_downs: list[tuple[float, int]] = []  # carried out: (t, pods removed)
    injected: Counter[str] = Counter()
    actions: Counter[str] = Counter()
    peak_needed = peak_replicas = 0
    guarded = 0  # ticks where healthy data would have scaled down and the fault held

    for i in range(TICKS):
        now = START + i * TICK
        t = i * TICK
        if rng.random() < 1 / 240:  # a burst every hour on average, 5-30 minutes of +3..+8 req/s
            bursts.append((t, t + rng.uniform(300, 1800), rng.uniform(3, 8)))
        rate = arrivals(t, bursts)
        fleet.step(now, TICK, rate)
        peak_needed = max(peak_needed, math.ceil(rate / fleet.capacity_per_second(1)))

        if fault_left == 0:
            fault = None
            if rng.random() < 0.04:  # a new fault episode, 1-20 ticks long
                fault, fault_left = rng.choice(FAULTS), rng.randint(1, 20)
                injected[fault] += 1
        fault_left = max(0, fault_left - 1)
        record: dict[str, Any] = {"tick": i, "t": now, "fault": fault}

        if fault == "cluster_unreadable":  # the loop decides nothing this tick
            record.update(event="cluster_unreadable", action="error")
            log.append(json.dumps(record))
            actions["error"] += 1
            continue

        clean = fleet.observe(now)
        obs = inject(fault, clean, now, rng) if fault is not None else clean
        current = obs.spec_replicas
        decision, new_state = decide(params, obs, state, now)
        desired = decision.desired_replicas

        # ---- invariants of this tick
        assert params.min_replicas <= desired <= params.max_replicas, (i, decision)
        health = assess_health(obs.ready_pods, now, params.stale_after_seconds)
        if health.unhealthy or not obs.ready_pods:
            assert desired >= current, ("scale-down on unhealthy data", i, fault, decision)
            if decide(params, clean, state, now)[0].desired_replicas < current:
                guarded += 1  # the fault is what stopped a scale-down this tick
        if obs.rollout_in_progress:
            assert desired >= current, ("scale-down during a rollout", i, decision)

        # ---- act, as the loop does
        if desired != current and fault == "patch_failed":
            action = "error"
            state = settle(new_state, state, Outcome.FAILED)
        else:
            action = "patched" if desired != current else "hold"
            state = new_state
            if desired < current:
                removed = current - desired
                window = [n for at, n in scale_downs if now - at < params.scale_down_period_seconds]
                assert not window, ("two scale-downs inside the step period", i, scale_downs[-3:], decision)
                assert removed <= params.scale_down_max_pods, ("step exceeded", i, decision)
                scale_downs.append((now, removed))
            fleet.scale_to(desired, now)
        assert params.min_replicas <= fleet.spec <= params.max_replicas
        peak_replicas = max(peak_replicas, fleet.spec)
        actions[action] += 1
        record.update(event="decision", action=action, current=current, desired=desired,
                      reason=decision.reason.value, clamp=decision.clamp.value if decision.clamp else None,
                      **decision.values.as_dict())
        log.append(json.dumps(record))

    # ---- the decision log is complete: one parseable record per tick, in order
    assert len(log) == TICKS
    records = [json.loads(line) for line in log]
    assert [r["tick"] for r in records] == list(range(TICKS))
    value_keys = set(decide(params, fleet.observe(START), PolicyState(), START)[0].values.as_dict())
    for r in records:
        if r["event"] == "decision":
            assert {"action", "current", "desired", "reason", "clamp"} <= r.keys() and value_keys <= r.keys()
            assert r["reason"]
        else:
            assert r["event"] == "cluster_unreadable" and r["fault"] == "cluster_unreadable"

    # ---- the run exercised what it claims, and the controller still did its job
    assert set(injected) == set(FAULTS), injected
    assert sum(injected.values()) >= 100
    assert actions["patched"] >= 50 and len(scale_downs) >= 10
    assert peak_replicas >= min(peak_needed, params.max_replicas)
    assert fleet.waiting < 50 * fleet.ready  # no backlog left growing at the end of the day
    assert guarded >= min_guarded, guarded  # the invariant was tested where it matters
    print(dict(injected), dict(actions), len(scale_downs), guarded, peak_replicas, peak_needed,
          Counter(r.get("reason") for r in records).most_common())
    assert time.perf_counter() - started < 120


def test_one_scale_down_never_removes_more_than_the_step() -> None:
    """Found by this soak with scale_down_window_seconds 0 (tick 1716: 10 -> 8 right after
    5 -> 10): the scale-down limit counted from the replicas before the period's scale-ups, as
    HPA does. policy/limits.py now counts the pods removed inside the period."""
    from tests.policy.builders import obs, pods

    p = PolicyParams(min_replicas=1, max_replicas=16, scale_down_window_seconds=0,
                     scale_down_window_lead_times=0)
    now = 1_000_000.0
    up, state = decide(p, obs(5, pods(5, 20, 32, 1.0, now)), PolicyState(), now)
    assert (up.current_replicas, up.desired_replicas) == (5, 8)
    down, _ = decide(p, obs(8, pods(5, 0, 1, 0.05, now + 15)), state, now + 15)
    assert down.current_replicas - down.desired_replicas <= p.scale_down_max_pods, down  # was 8 -> 4
