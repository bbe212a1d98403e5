"""Which ready pod a simulated scale-down removes (`Cluster.scale_down_choice`), and the count
of the requests it reaches (`Cluster.removals`)."""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest

from autoscaler.sim.cluster import Cluster, ScaleDownChoice
from autoscaler.sim.profile import load_profile

P = load_profile("qwen3-8b-h100")
LOAD = [2, 0, 5]  # requests on pod 0, 1, 2; pod 2 is the most recently ready


def fleet(choice: ScaleDownChoice = "replicaset", *, scrape: bool = True, grace: float | None = None,
          seed: int = 0) -> Cluster:
    profile = P if grace is None else replace(P, drain_grace_s=grace)
    cl = Cluster(profile, 3, max_pods=8, warm_nodes=3, startup="fixed", scale_down_choice=choice, seed=seed)
    cl.pods[2].ready = 5.0
    for pod, n in zip(cl.pods, LOAD):
        assert pod.slot is not None
        if n:
            cl.engine.enqueue(np.full(n, pod.slot, dtype=np.int64), np.zeros(n), np.full(n, 200, dtype=np.int64),
                              np.full(n, 400, dtype=np.int64))
    if scrape:
        cl.scrape(10.0)
    return cl


def removed(cl: Cluster) -> list[str]:
    return [p.name for p in cl.pods + cl.gone if p.deleted is not None]


def test_by_default_the_most_recently_ready_pod_goes_whatever_it_holds() -> None:
    cl = fleet()
    cl.set_replicas(2, 20.0)
    assert removed(cl) == ["vllm-3"]
    [r] = cl.removals
    assert (r.t, r.pod, r.in_flight, r.killed) == (20.0, "vllm-3", 5, None)  # draining


def test_least_work_removes_the_pod_with_the_fewest_requests_in_its_last_scrape() -> None:
    cl = fleet("least_work")
    cl.set_replicas(1, 20.0)
    assert sorted(removed(cl)) == ["vllm-1", "vllm-2"]  # 2 and 0 requests; vllm-3 (5) stays
    assert sorted(r.in_flight for r in cl.removals) == [0, 2]


def test_least_work_now_reads_the_engine_not_the_scrape() -> None:
    cl = fleet("least_work_now", scrape=False)
    cl.set_replicas(2, 20.0)
    assert removed(cl) == ["vllm-2"]


def test_least_work_never_reads_a_pod_without_a_scrape_as_idle() -> None:
    cl = fleet("least_work", scrape=False)
    cl.set_replicas(2, 20.0)
    assert removed(cl) == ["vllm-3"]  # no marks: the ReplicaSet's own order


def test_random_choice_draws_from_its_own_generator() -> None:
    picks = set()
    for seed in range(12):
        cl = fleet("random", seed=seed)
        before = cl.rng.bit_generator.state
        cl.set_replicas(2, 20.0)
        assert cl.rng.bit_generator.state == before  # the fleet's draws are untouched
        picks.update(removed(cl))
    assert picks == {"vllm-1", "vllm-2", "vllm-3"}


@pytest.mark.parametrize(("grace", "killed"), [(30.0, 0), (0.0, 5)])
def test_a_removal_counts_what_the_drain_grace_did_not_finish(grace: float, killed: int) -> None:
    cl = fleet(grace=grace)
    cl.set_replicas(2, 20.0)
    t = 20.0
    while cl.removals[0].killed is None and t < 100.0:
        cl.advance(t)
        cl.engine.step(t, 0.5)
        t += 0.5
    assert cl.removals[0].in_flight == 5 and cl.removals[0].killed == killed
    assert cl.failed.arrival.size == killed


def test_an_unknown_choice_is_refused() -> None:
    with pytest.raises(ValueError, match="scale_down_choice must be one of replicaset, random, least_work, least_work_now"):
        Cluster(P, 1, max_pods=2, scale_down_choice="oldest")  # type: ignore[arg-type]
