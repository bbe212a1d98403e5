"""One run: seeds, fixed vs random start-up, node and pod GPU-hours, policy hooks."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pytest

from autoscaler.baselines.view import ClusterView
from autoscaler.sim import runner
from autoscaler.sim.cluster import Cluster
from autoscaler.sim.profile import load_profile
from autoscaler.sim.runner import PolicyHooks, RunConfig, RunResult, policy_hooks, run
from autoscaler.sim.stats import Slo
from autoscaler.sim.traces import Trace, open_trace

P = load_profile("qwen3-8b-h100")  # model load 90 s, node 300 s, 1 GPU per node and per pod


class WantFive:
    """Asks for 5 replicas at its first decision (120 s, after the warm-up)."""

    name = "want-five"
    interval_s = 15.0

    def decide(self, view: ClusterView, now: float) -> int:
        return 5


@pytest.fixture(scope="module")
def trace(tmp_path_factory: pytest.TempPathFactory) -> Trace:
    csv = Path(tmp_path_factory.mktemp("runner")) / "t.csv"
    csv.write_text("arrival_s,input_tokens,output_tokens\n" + "".join(f"{t}.0,100,10\n" for t in range(0, 900, 5)))
    return open_trace(csv, 0.0, 900.0)


def _run(trace: Trace, **cfg: object) -> RunResult:
    return run(trace, P, WantFive(), RunConfig(initial_replicas=1, max_replicas=10, **cfg))  # type: ignore[arg-type]


def test_fixed_start_up_bills_nodes_from_request_and_pods_from_scheduling(trace: Trace) -> None:
    """4 pods asked for at 120 s; the cluster-autoscaler sees them unschedulable at the next
    tick (121 s) and asks for 4 nodes, ready at 421 s; the pods bind then and load 90 s (ready
    at 511 s). Slice 900 s. Nodes: warm 900 s + 4 x (900 - 121) = 4,016 s. Pods: warm 900 s +
    4 x (900 - 421) = 2,816 s."""
    r = _run(trace, startup="fixed")
    assert r.gpu_hours_nodes == pytest.approx(4016.0 / 3600.0)
    assert r.gpu_hours_pods == pytest.approx(2816.0 / 3600.0)
    assert r.gpu_hours == r.gpu_hours_pods
    assert (r.seed, r.startup) == (0, "fixed")
    assert r.series["ready"][8:10] == [1.0, 5.0]  # minute 8 (480 s): 1 ready; minute 9 (540 s): 5


def test_seed_0_repeats_and_other_seeds_differ(trace: Trace) -> None:
    a, b, c = _run(trace), _run(trace), _run(trace, seed=1)
    assert a.startup == "random" and (a.seed, c.seed) == (0, 1)
    assert (a.gpu_hours_nodes, a.gpu_hours_pods, a.series) == (b.gpu_hours_nodes, b.gpu_hours_pods, b.series)
    assert (a.gpu_hours_nodes, a.gpu_hours_pods) != (c.gpu_hours_nodes, c.gpu_hours_pods)
    fixed = _run(trace, startup="fixed")
    assert a.gpu_hours_pods != fixed.gpu_hours_pods  # the draws change when pods are scheduled


def test_random_start_up_stays_in_the_stated_ranges(trace: Trace) -> None:
    """Nodes asked for at 121 s are ready 180-420 s later (the pods bind at the next tick, 301-
    542 s), so the 4 new pods are billed for 358-599 s each; their nodes for 779 s each
    whatever the draw."""
    r = _run(trace, seed=5)
    assert r.gpu_hours_nodes == pytest.approx(4016.0 / 3600.0)
    assert r.gpu_hours_pods is not None
    assert (900.0 + 4 * 358.0) / 3600.0 - 1e-9 <= r.gpu_hours_pods <= (900.0 + 4 * 599.0) / 3600.0 + 1e-9


class Planner:
    """Reads no metrics: 2 replicas until 600 s, then 1; optionally keeps a node floor."""

    name = "planner"
    interval_s = 15.0
    reads_metrics = False

    def __init__(self, floor: int | None = None) -> None:
        if floor is not None:
            self.node_floor = lambda now: floor

    def decide(self, view: ClusterView, now: float) -> int:
        return 2 if now < 600.0 else 1


class Capped(WantFive):
    pod_concurrency_limit = 4


@pytest.fixture(scope="module")
def long_trace(tmp_path_factory: pytest.TempPathFactory) -> Trace:
    csv = Path(tmp_path_factory.mktemp("runner")) / "t.csv"
    csv.write_text("arrival_s,input_tokens,output_tokens\n" + "".join(f"{t}.0,100,10\n" for t in range(0, 1800, 5)))
    return open_trace(csv, 0.0, 1800.0)


def test_hooks_of_plain_capped_and_planning_policies() -> None:
    from autoscaler.sim.oracle import OraclePolicy

    assert policy_hooks(WantFive()) == PolicyHooks(None, True, None)
    assert policy_hooks(Capped()) == PolicyHooks(None, True, 4)
    assert policy_hooks(Planner()) == PolicyHooks(None, False, None)
    oracle = policy_hooks(OraclePolicy(np.full(5, 3, dtype=np.int64), P, max_replicas=10))
    assert oracle.node_floor is not None and oracle.node_floor(0.0) == 3 and not oracle.reads_metrics
    metric_floor = type("MetricFloor", (WantFive,), {"reads_metrics": True, "node_floor": lambda self, now: 1})()
    assert policy_hooks(metric_floor).reads_metrics  # a declared reads_metrics wins


@pytest.mark.parametrize(("attrs", "error"), [({"pod_concurrency_limit": 0}, ValueError),
                                              ({"pod_concurrency_limit": True}, ValueError),
                                              ({"pod_concurrency_limit": 2.5}, ValueError),
                                              ({"node_floor": 3}, TypeError)])
def test_bad_hooks_are_refused(attrs: dict[str, object], error: type[Exception]) -> None:
    with pytest.raises(error):
        policy_hooks(type("Bad", (WantFive,), attrs)())


def test_the_run_hands_the_concurrency_limit_to_the_cluster(trace: Trace, monkeypatch: pytest.MonkeyPatch) -> None:
    seen: list[int | None] = []

    class Spy(Cluster):
        def route(self, arrival: Any, n_in: Any, n_out: Any) -> None:
            seen.append(self.pod_concurrency_limit)
            super().route(arrival, n_in, n_out)

    monkeypatch.setattr(runner, "Cluster", Spy)
    run(trace, P, Capped(), RunConfig(max_replicas=10))
    assert seen and set(seen) == {4}
    seen.clear()
    run(trace, P, WantFive(), RunConfig(max_replicas=10))
    assert seen and set(seen) == {None}


def test_a_planner_decides_from_t0_and_its_node_floor_keeps_nodes(long_trace: Trace) -> None:
    """2 replicas from t = 0: the second pod's node is asked for at 1 s. At 600 s the planner
    goes back to 1: the pod leaves at 601 s, its node 600 s later (1201 s), unless the floor
    of 2 nodes keeps it to the end (1800 s). Nodes: warm 1800 s + 1200 s, or + 1799 s."""
    cfg = RunConfig(max_replicas=10, startup="fixed")
    free = run(long_trace, P, Planner(), cfg)
    kept = run(long_trace, P, Planner(floor=2), cfg)
    assert free.series["spec"][0] == 2.0  # decided at t = 0, no warm-up
    assert free.gpu_hours_nodes == pytest.approx((1800.0 + 1200.0) / 3600.0)
    assert kept.gpu_hours_nodes == pytest.approx((1800.0 + 1799.0) / 3600.0)
    assert kept.gpu_hours_pods == free.gpu_hours_pods


def test_a_length_aware_slo_runs_end_to_end(tmp_path: Path) -> None:
    """8,000-token prompts alone on an idle replica take ~0.35 s to the first token (Qwen3-8B/
    H100): all miss a flat 0.2 s TTFT target, none misses 0.2 s with factor 5 (bound ~1.7 s)."""
    csv = tmp_path / "long.csv"
    csv.write_text("arrival_s,input_tokens,output_tokens\n" + "".join(f"{t}.0,8000,10\n" for t in range(0, 300, 10)))
    long = open_trace(csv, 0.0, 300.0)
    flat = run(long, P, WantFive(), RunConfig(startup="fixed", slo=Slo(0.2, 0.1)))
    aware = run(long, P, WantFive(), RunConfig(startup="fixed", slo=Slo(0.2, 0.1, 5.0)))
    assert flat.requests == aware.requests == 30
    assert (flat.slo_attainment, aware.slo_attainment) == (0.0, 1.0)
