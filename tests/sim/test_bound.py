"""The fluid lower bound (autoscaler.sim.bound): hand arithmetic, then against real runs and the
published results."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from autoscaler.sim.bound import (
    LowerBound,
    allowed_misses,
    attainment_grid,
    combine,
    deadlines,
    replica_seconds_bound,
    seed_bound,
    window_bound,
)

RESULTS = Path(__file__).resolve().parents[2] / "simulations" / "results"

# five requests on [0, 20 s]: (arrival, deadline, work)
ARR = np.array([0.0, 2.0, 8.0, 11.0, 15.0])
DL = np.array([5.0, 9.0, 12.0, 19.0, 25.0])
WORK = np.array([4.0, 8.0, 5.0, 3.0, 6.0])


def test_deadline_is_arrival_plus_ttft_bound_plus_the_decode_steps() -> None:
    d = deadlines(np.array([1.0, 0.0]), np.array([11, 1]), np.array([2.0, 0.5]), 0.1)
    assert d.tolist() == pytest.approx([1.0 + 2.0 + 10 * 0.1, 0.5])


def test_windows_of_10_s_by_hand() -> None:
    # window [0, 10): requests 1 and 2 (work 4 + 8 = 12 > floor 10); request 3 crosses 10 s;
    # window [10, 20): request 4 (work 3 < floor 10); request 5 ends after T = 20: ignored.
    # k = 0: 12 + 10 = 22; k = 1: drop the largest (8): 22 - 8 = 14 < floors 20 -> 20.
    b = window_bound(ARR, DL, WORK, 20.0, 10.0, 1, np.array([0, 1, 2]))
    assert b.tolist() == [22.0, 20.0, 20.0]


def test_the_whole_slice_counts_requests_crossing_window_edges() -> None:
    # W = 20: requests 1-4 are inside [0, 20] (work 20), the floor is 20; max(20, 20) = 20.
    assert window_bound(ARR, DL, WORK, 20.0, 20.0, 1, np.array([0])).tolist() == [20.0]
    # the bound is the best window: max(22, 20) = 22 at k = 0
    assert replica_seconds_bound(ARR, DL, WORK, 20.0, 1, np.array([0]), windows_s=(10.0,)).tolist() == [22.0]


def test_the_floor_is_min_replicas_times_the_window() -> None:
    # 3 replicas at least: floors 30 + 30 = 60, the work (12 + 3) never reaches them
    assert window_bound(ARR, DL, WORK, 20.0, 10.0, 3, np.array([0])).tolist() == [60.0]
    # a last window shorter than W: [0, 15) + [15, 20): 1 x 15 + 1 x 5
    assert window_bound(np.zeros(0), np.zeros(0), np.zeros(0), 20.0, 15.0, 1, np.array([0])).tolist() == [20.0]


def test_allowed_misses_are_floor_of_the_misses_the_target_leaves() -> None:
    assert allowed_misses(np.array([1.0, 0.99, 0.995, 0.9]), 1000).tolist() == [0, 10, 5, 100]
    assert allowed_misses(np.array([0.99]), 150).tolist() == [1]  # 1.5 -> 1


def test_seed_bound_is_gpu_hours() -> None:
    # one request of 7,200 replica-s due by t = 2 s in a 3 h slice, 2 GPUs a replica, min 1 replica.
    # Best window 10 s: [0, 10 s) holds the request (7,200 > floor 10), the other 1,079 windows
    # their floors (10,790): 17,990 replica-s x 2 / 3,600 = 9.9944 GPU-h (the whole slice: 10,800 -> 6).
    g = np.array([1.0, 0.0])
    b = seed_bound(np.array([0.0]), np.array([1]), np.array([7200.0]), np.array([2.0]), 0.1, 10_800.0, 1, 2, g)
    # at attainment 0 the request may miss (k = 1): the floors alone, 3 h x 2 GPUs = 6 GPU-h
    assert b.tolist() == pytest.approx([17_990 * 2 / 3600, 6.0])


def test_combined_bound_is_convex_and_below_every_seed() -> None:
    grid = attainment_grid()
    rng = np.random.default_rng(3)
    seeds = []
    for _ in range(3):
        arr = np.sort(rng.uniform(0, 600, 2000))
        w = rng.exponential(1.0, 2000)
        seeds.append(seed_bound(arr, np.full(2000, 20), w, np.full(2000, 2.0), 0.1, 600.0, 1, 1, grid))
    lb = combine(grid, seeds)
    low = np.min(np.vstack(seeds), axis=0)
    assert all(lb.at(a) <= v + 1e-12 for a, v in zip(grid, low))
    slopes = np.diff(lb.gpu_hours) / np.diff(lb.a)
    assert (np.diff(slopes) >= -1e-9).all()  # convex
    assert lb.at(0.99) >= lb.at(0.9) >= 600 / 3600 - 1e-12  # never below the floor of 1 replica


def test_lower_bound_interpolates_between_vertices() -> None:
    lb = LowerBound((0.0, 0.5, 1.0), (1.0, 1.0, 3.0))
    assert lb.at(0.75) == 2.0
    assert lb.cost_at([0.9, 0.99]) == pytest.approx({"0.9": 2.6, "0.99": 2.96})


def test_real_runs_never_cost_less_than_the_bound_at_their_attainment() -> None:
    from autoscaler.sim.experiment import Scenario, bound_of, prepare, run_one

    sc = Scenario(name="b", trace="simulations/data/azure2023-conv-20min.csv", duration=240.0, peak_replicas=6,
                  max_replicas=40)
    prep = prepare(sc)
    lb = combine(attainment_grid(), [bound_of(prep)])
    assert lb.at(1.0) > 0.0
    for name, knob in (("static", 0.5), ("static", 1.0), ("static", 2.0), ("queue-lead", 128.0), ("kpa", 100.0),
                       ("hpa", 5.0)):
        r = run_one(prep, name, knob)
        nodes = float(r.gpu_hours_nodes if r.gpu_hours_nodes is not None else r.gpu_hours)
        assert nodes >= lb.at(r.slo_attainment) - 1e-9, (name, knob, nodes, r.slo_attainment)


def _published() -> list[dict[str, object]]:
    # the routing-sensitivity sweeps too (the bound holds whatever the router does), and the 10-seed study
    docs = [json.loads(p.read_text()) for p in sorted([*RESULTS.glob("*.json"), *RESULTS.glob("sensitivity/*.json"),
                                                       *RESULTS.glob("seeds/*.json")])]
    return [d for d in docs if isinstance(d, dict) and "lower_bound" in d and "policies" in d]


def test_published_results_never_beat_the_bound() -> None:
    docs = _published()
    if not docs:
        pytest.skip("no published result of the new schema yet")
    for doc in docs:
        lb = doc["lower_bound"]
        curve = LowerBound(tuple(lb["curve"]["attainment"]), tuple(lb["curve"]["gpu_hours"]))
        for name, entry in doc["policies"].items():
            for t, cost in entry["cost_at"].items():
                if cost is not None:
                    assert lb["cost_at"][t] <= cost["mean"] + 1e-9, (doc["scenario"], name, t)
            for p in entry["points"]:
                att, nodes = p["slo_attainment"]["mean"], p["gpu_hours_nodes"]["mean"]
                assert curve.at(att) <= nodes + 1e-9, (doc["scenario"], name, p["knob"])
                # run by run (every published document keeps them: the schema requires them): a mean
                # can pass while one seed's run costs less than the bound at its own attainment,
                # which would falsify the bound
                per_seed = p["per_seed"]
                assert len(per_seed["slo_attainment"]) == len(p["seeds"]) >= 3, (doc["scenario"], name, p["knob"])
                for seed, a, c in zip(p["seeds"], per_seed["slo_attainment"], per_seed["gpu_hours_nodes"]):
                    assert curve.at(a) <= c + 1e-9, (doc["scenario"], name, p["knob"], seed)


def test_only_windows_of_whole_ticks_are_used() -> None:
    # with a 3 s tick, 10 s windows would cut ticks: only the whole slice (20 s) remains
    ks = np.array([0])
    assert replica_seconds_bound(ARR, DL, WORK, 20.0, 1, ks, windows_s=(10.0,), tick_s=3.0).tolist() == [20.0]
    assert replica_seconds_bound(ARR, DL, WORK, 20.0, 1, ks, windows_s=(10.0,), tick_s=2.0).tolist() == [22.0]
