"""The clairvoyant heuristic's schedule: no schedule covering ITS need costs less (it is not a bound
on meeting the SLO: autoscaler.sim.bound is)."""

from __future__ import annotations

import itertools
from pathlib import Path

import numpy as np

from autoscaler.sim.oracle import BIN_S, OraclePolicy, need_replicas, schedule, schedule_cost
from autoscaler.sim.profile import load_profile
from autoscaler.sim.runner import RunConfig, run
from autoscaler.sim.traces import open_trace


def _level_cost_brute(on: np.ndarray, load_s: float) -> float:
    """Cheapest single-replica schedule covering the `on` bins: try bridging each gap or not."""
    idx = np.flatnonzero(on)
    if idx.size == 0:
        return 0.0
    gaps = [(b - a - 1) * BIN_S for a, b in zip(idx[:-1], idx[1:])]
    best = float("inf")
    for choice in itertools.product((False, True), repeat=len(gaps)):
        cost = idx.size * BIN_S + load_s
        for bridge, g in zip(choice, gaps):
            cost += g if bridge else load_s
        best = min(best, cost)
    return best


def test_schedule_cost_is_the_minimum_over_all_bridging_choices() -> None:
    rng = np.random.default_rng(0)
    for _ in range(40):
        need = rng.integers(0, 4, size=int(rng.integers(3, 10)))
        load = float(rng.choice([30.0, 90.0, 150.0, 400.0]))
        brute = sum(_level_cost_brute(need >= k, load) for k in range(1, int(need.max()) + 1))
        assert abs(schedule_cost(need, load) - brute) < 1e-6


def test_schedule_covers_the_need_and_bridges_short_gaps() -> None:
    need = np.array([2, 0, 2, 0, 0, 0, 0, 2])
    s = schedule(need, 90.0)  # load 90 s = 2 bins: a 1-bin gap is bridged, a 4-bin gap is not
    assert (s >= need).all()
    assert s.tolist() == [2, 2, 2, 0, 0, 2, 2, 2]  # replicas asked for 2 bins ahead
    assert schedule_cost(need, 90.0) == 2 * (3 * BIN_S + 90.0 + BIN_S + 90.0)


def test_need_from_work() -> None:
    # 600 GPU-s of work in a bin = 10 replicas busy; at u = 0.8 -> 12.5 -> 13 (neighbours count)
    assert need_replicas(np.array([600.0, 0.0, 0.0]), 0.8).tolist() == [13, 13, 1]


def test_the_oracle_plans_from_t0_while_reactive_policies_wait_out_the_warmup(tmp_path: Path) -> None:
    """The oracle reads no metrics, so the 120 s warm-up (no decisions on an empty fleet's
    metrics) does not hold it back; a reactive policy's first decision comes at 120 s."""
    csv = tmp_path / "t.csv"
    csv.write_text("arrival_s,input_tokens,output_tokens\n" + "".join(f"{t}.0,100,10\n" for t in range(0, 300, 5)))
    trace = open_trace(csv, 0.0, 300.0)
    profile = load_profile("qwen3-8b-h100")
    cfg = RunConfig(initial_replicas=1, max_replicas=10)

    class WantFive:
        name = "want-five"
        interval_s = 15.0

        def decide(self, view: object, now: float) -> int:
            return 5

    oracle = OraclePolicy(np.full(5, 5, dtype=np.int64), profile, max_replicas=10)
    assert run(trace, profile, oracle, cfg).series["spec"][:3] == [5.0, 5.0, 5.0]
    assert run(trace, profile, WantFive(), cfg).series["spec"][:3] == [1.0, 1.0, 5.0]  # asked at 120 s
