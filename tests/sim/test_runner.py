"""One run: seeds, fixed vs random start-up, node and pod GPU-hours."""

from __future__ import annotations

from pathlib import Path

import pytest

from autoscaler.baselines.view import ClusterView
from autoscaler.sim.profile import load_profile
from autoscaler.sim.runner import RunConfig, RunResult, run
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
