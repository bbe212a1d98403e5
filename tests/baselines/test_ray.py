"""Ray Serve: total ongoing / target, scaling factors, delays in seconds (the same at --dt 1 and 2),
max_ongoing_requests as the router's per-pod limit."""

from __future__ import annotations

import numpy as np
import pytest

from autoscaler.baselines.ray_serve import RayServe, scaled_replicas
from autoscaler.sim.cluster import Cluster
from autoscaler.sim.profile import load_profile
from tests.baselines.fleet import pods, view


@pytest.mark.parametrize(("desired", "current", "factor", "expected"), [
    (8.0, 4, 1.0, 8),   # ceil(4 + 1 x 4)
    (3.2, 4, 1.0, 4),   # ceil(3.2) = 4: no change
    (2.9, 4, 1.0, 3),   # ceil(2.9) = 3
    (2.5, 4, 0.5, 3),   # ceil(4 - 0.5 x 1.5) = ceil(3.25) = 4 = current, but a scale-down removes one: 3
    (8.0, 4, 0.5, 6),   # ceil(4 + 0.5 x 4) = 6
])
def test_scaling_factors(desired: float, current: int, factor: float, expected: int) -> None:
    assert scaled_replicas(desired, current, factor, factor) == expected


def test_max_ongoing_requests_is_four_times_the_target() -> None:
    assert RayServe(16.0).pod_concurrency_limit == 64 and RayServe(35.0).pod_concurrency_limit == 140
    assert RayServe(16.0, max_ongoing_requests=20).pod_concurrency_limit == 20


def test_requests_at_the_handle_count() -> None:
    # 4 replicas at their 64 + 256 queued at the handle: 512 / 16 = 32 wanted; up after 30 s
    r = RayServe(16.0, upscale_delay_s=0.0)
    assert r.decide(view(4, pods(4, out=64), router=256), 0.0) == 32


def decisions(dt: float, until: float, load: dict[float, int], spec: int = 4) -> dict[float, int]:
    """The policy driven every `dt` (as the runner does with interval_s 1 s), 4 running replicas,
    total load from `load` (time -> total, held until the next entry), spec kept at `spec`."""
    r = RayServe(64.0)
    out: dict[float, int] = {}
    for step in range(int(until / dt) + 1):
        t = step * dt
        total = load[max(k for k in load if k <= t)]
        out[t] = r.decide(view(spec, pods(4, out=total // 4)), t)
    return out


@pytest.mark.parametrize("dt", [1.0, 2.0])
def test_upscale_delay_is_30_seconds_at_any_dt(dt: float) -> None:
    # 512 in flight from t = 0, target 64: 512 / 64 = 8 > 4 from the first push; applied once the
    # wish has lasted 30 s: at t = 30 whatever the tick
    out = decisions(dt, 40.0, {0.0: 512})
    assert out[28.0] == 4 and out[30.0] == 8


def test_a_load_step_gives_the_same_decisions_at_dt_1_and_dt_2() -> None:
    # load 0 until t = 20, then 512. Pushes every 10 s of the 30 s time-weighted average:
    # t = 0..30: 0 -> 1 wanted (down, 600 s delay); t = 40: 512 x 20 / 30 = 341 -> 6 > 4: up from t = 40;
    # t = 50: 512 -> 8; applied at t = 40 + 30 = 70
    one = decisions(1.0, 120.0, {0.0: 0, 20.0: 512})
    two = decisions(2.0, 120.0, {0.0: 0, 20.0: 512})
    assert {t: v for t, v in one.items() if t in two} == two
    assert one[68.0] == 4 and one[70.0] == 8 and two[70.0] == 8


def test_downscale_delay_is_600_seconds() -> None:
    # 8 replicas, 64 in flight in total: 64 / 64 = 1 < 8, applied after 600 s of wanting it
    r = RayServe(64.0)
    v = view(8, pods(8, out=8))
    out = {t: r.decide(v, float(t)) for t in range(0, 601, 1)}
    assert out[599] == 8 and out[600] == 1


def test_the_router_holds_what_max_ongoing_requests_refuses() -> None:
    # with the policy's limit on the cluster (the runner's job), a replica never holds more than
    # max_ongoing_requests = 4 x 16 = 64; the rest is queued at the "handle", and the policy counts it
    cl = Cluster(load_profile("qwen3-8b-h100"), 2, max_pods=8, warm_nodes=2, seed=0)
    r = RayServe(16.0, upscale_delay_s=0.0)
    cl.pod_concurrency_limit = r.pod_concurrency_limit
    n = 200
    cl.route(np.arange(n, dtype=np.float64) * 0.001, np.full(n, 300, dtype=np.int64), np.full(n, 100, dtype=np.int64))
    assert int(cl.engine.outstanding().max()) == 64 and cl.pending_t.size == 200 - 128
    # (128 at the replicas + 72 at the handle) / 16 = 12.5 -> 13 replicas wanted
    assert r.decide(cl.view(0.0), 0.0) == 13
