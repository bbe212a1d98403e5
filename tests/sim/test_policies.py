"""The registry: exactly the pre-registered scoreboard with its knobs and grids, old names as
aliases, every policy buildable at every grid point, and the per-pod limits the router applies.
(Each baseline's rule is tested in tests/baselines/.)"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml

from autoscaler.baselines.hpa import HpaQueue
from autoscaler.baselines.hpa_waiting import HpaWaiting
from autoscaler.baselines.kpa import Kpa
from autoscaler.baselines.queue_lead import QueueLead
from autoscaler.baselines.ray_serve import RayServe
from autoscaler.baselines.static import StaticFleet
from autoscaler.baselines.view import ClusterView, PodMetrics
from autoscaler.sim.policies import ALIASES, POLICIES, SCOREBOARD, canonical, make_policy, queue_lead_spec

PREREGISTERED = Path(__file__).resolve().parents[2] / "simulations" / "preregistered.yaml"


@pytest.fixture(scope="module")
def protocol() -> dict[str, Any]:
    doc: dict[str, Any] = yaml.safe_load(PREREGISTERED.read_text())
    return doc


def test_the_scoreboard_is_the_protocols(protocol: dict[str, Any]) -> None:
    assert list(SCOREBOARD) == list(protocol["policies"])
    assert set(SCOREBOARD) <= set(POLICIES) and set(POLICIES) - set(SCOREBOARD) == {"hpa-cpu", "oracle"}


@pytest.mark.parametrize("name", SCOREBOARD)
def test_knob_and_grid_are_the_protocols(protocol: dict[str, Any], name: str) -> None:
    spec = POLICIES[name]
    registered = protocol["policies"][name]
    assert spec.knob == registered["knob"]
    assert sorted(spec.grid) == sorted(float(x) for x in registered["grid"])
    assert len(spec.grid) == protocol["grid_points"] == 8


def test_grids_run_from_cheapest_to_most_generous() -> None:
    # a load per pod / a usage target: higher is cheaper; static: a multiple of the peak, lower is cheaper
    for name in ("queue-lead", "hpa", "hpa-waiting", "keda", "kpa", "ray", "aibrix-apa", "wva"):
        assert list(POLICIES[name].grid) == sorted(POLICIES[name].grid, reverse=True), name
    assert list(POLICIES["static"].grid) == sorted(POLICIES["static"].grid)


def test_old_names_are_aliases_not_entries() -> None:
    assert "static-peak" in POLICIES and "hpa-queue" in POLICIES
    assert "static-peak" not in list(POLICIES) and "hpa-queue" not in list(POLICIES)
    assert POLICIES["static-peak"] is POLICIES["static"] and canonical("hpa-queue") == "hpa"
    assert set(ALIASES.values()) <= set(SCOREBOARD) and "nope" not in POLICIES
    assert isinstance(make_policy("static-peak", 1.25, 1, 100, peak_need=8), StaticFleet)


@pytest.mark.parametrize("name", SCOREBOARD)
def test_every_grid_point_builds_and_decides(name: str) -> None:
    idle = ClusterView(2, (PodMetrics("a", 0.0, 8.0, 0.2, 100.0, None, 8, -200.0, -190.0, -100.0),), (), 0, 0)
    for knob in (*POLICIES[name].grid, None):
        policy = make_policy(name, knob, 1, 10, peak_need=2)  # static: at most 4 x 2 = 8 <= 10
        assert policy.name == name
        assert 1 <= policy.decide(idle, 200.0) <= 10


@pytest.mark.parametrize(("name", "knob", "limit"), [
    ("kpa", 116.0, 116),  # containerConcurrency
    ("ray", 35.0, 140),   # max_ongoing_requests = 4 x target_ongoing_requests
    ("ray", 16.0, 64),
    ("hpa", 78.0, None), ("hpa-waiting", 1.0, None), ("keda", 78.0, None), ("aibrix-apa", 0.5, None),
    ("wva", 0.8, None), ("static", 1.0, None), ("queue-lead", 172.0, None),
])
def test_pod_concurrency_limits(name: str, knob: float, limit: int | None) -> None:
    assert getattr(make_policy(name, knob, 1, 10), "pod_concurrency_limit", None) == limit


def test_builders_set_each_knob() -> None:
    h = make_policy("hpa", 52.0, 1, 10)
    assert isinstance(h, HpaQueue) and h.params.target_average_value == 52.0
    assert h.params.metric == ("waiting", "running") and h.needs == ("waiting", "running")
    w = make_policy("hpa-waiting", 4.0, 1, 10)
    assert isinstance(w, HpaWaiting) and w.params.target_average_value == 4.0
    k = make_policy("kpa", 172.0, 1, 10)
    assert isinstance(k, Kpa) and k.target == pytest.approx(0.7 * 172)
    r = make_policy("ray", 24.0, 1, 10)
    assert isinstance(r, RayServe) and r.target == 24.0
    s = make_policy("static", 1.10, 1, 100, peak_need=8)
    assert isinstance(s, StaticFleet) and s.replicas == 9  # ceil(1.1 x 8 = 8.8)


def test_queue_lead_knob_is_the_batch_target_by_default() -> None:
    assert queue_lead_spec(None) is POLICIES["queue-lead"]
    q = make_policy("queue-lead", 64.0, 1, 10)
    assert isinstance(q, QueueLead)
    assert q.params.target_running_per_replica == 64.0 and q.params.target_kv_cache_usage_ratio == 0.8
    d = make_policy("queue-lead", None, 1, 10, {"target_running_per_replica": 112})
    assert isinstance(d, QueueLead) and d.params.target_running_per_replica == 112  # the scenario's
    e = make_policy("queue-lead", None, 1, 10)
    assert isinstance(e, QueueLead) and e.params.target_running_per_replica == POLICIES["queue-lead"].default
    kv = make_policy("queue-lead", 0.5, 1, 10, queue_lead_knob="target_kv_cache_usage_ratio")
    assert isinstance(kv, QueueLead) and kv.params.target_kv_cache_usage_ratio == 0.5


def test_queue_lead_drives_the_decision_core() -> None:
    # 2 ready pods with 15 waiting, 8 running, KV 0.95, no free GPU, no throughput series (batch
    # model): (30 + 16) / (8 + 3) = 4.18, capped at one more replica per pod queued above target
    # (2 + 2 = 4); KV 1.9 / 0.8 = 2.4 -> 4 replicas
    q = make_policy("queue-lead", 0.8, 1, 10, queue_lead_knob="target_kv_cache_usage_ratio")
    assert isinstance(q, QueueLead)
    v = ClusterView(2, tuple(PodMetrics(n, 15.0, 8.0, 0.95, 100.0, None, 23, -200.0, -190.0, -100.0) for n in "ab"),
                    (), 0, 0)
    assert q.decide(v, 100.0) == 4
    assert q.last is not None and q.last.reason.value == "scale_up_queue"


def test_get_resolves_aliases_too() -> None:
    assert POLICIES.get("static-peak") is POLICIES["static"] and POLICIES.get("nope") is None
