"""Pod lifecycle, node pool, deletion order, billing (pods and nodes), random start-up, router."""

from __future__ import annotations

from dataclasses import replace

import numpy as np

from autoscaler.policy.types import PodStage
from autoscaler.sim.cluster import Cluster, water_fill
from autoscaler.sim.experiment import Scenario, prepare, run_one
from autoscaler.sim.profile import load_profile

P = load_profile("qwen3-8b-h100")  # model load 90 s (container 20 s), node 300 s, idle removal 600 s


def _tick(cl: Cluster, t0: float, t1: float, dt: float = 1.0) -> None:
    t = t0
    while t < t1:
        cl.advance(t)
        cl.engine.step(t, dt)
        t += dt


def test_scale_up_on_a_free_gpu_loads_then_serves() -> None:
    cl = Cluster(P, 1, max_pods=8, warm_nodes=2, startup="fixed")  # one spare GPU
    cl.set_replicas(2, 10.0)
    new = [p for p in cl.pods if p.ready is None][0]
    assert new.scheduled == 10.0
    assert new.stage(15.0, P.container_start_s) is PodStage.SCHEDULED
    assert new.stage(40.0, P.container_start_s) is PodStage.LOADING
    _tick(cl, 10.0, 100.0)
    assert new.ready is None
    _tick(cl, 100.0, 101.0)
    assert new.ready == 100.0  # 10 + 90


def test_no_free_gpu_waits_for_a_node_which_is_removed_when_idle() -> None:
    cl = Cluster(P, 1, max_pods=8, startup="fixed")
    cl.set_replicas(2, 0.0)
    pod = [p for p in cl.pods if p.ready is None][0]
    cl.advance(0.0)
    assert pod.scheduled is None and len(cl.nodes) == 2  # a node is on its way
    cl.advance(299.0)
    assert pod.scheduled is None
    cl.advance(300.0)
    assert pod.scheduled == 300.0
    cl.set_replicas(1, 500.0)  # the new pod is deleted; its node goes idle at 500
    cl.advance(1099.0)
    assert len(cl.nodes) == 2
    cl.advance(1100.0)
    assert len(cl.nodes) == 1  # removed after 600 s idle: a later scale-up waits again
    assert [n.removed_at for n in cl.removed_nodes] == [1100.0]
    cl.set_replicas(2, 1200.0)
    cl.advance(1200.0)
    assert [p for p in cl.pods if p.ready is None][0].scheduled is None


def test_scale_down_deletes_unready_pods_first_then_newest_ready() -> None:
    cl = Cluster(P, 3, max_pods=8, warm_nodes=4, startup="fixed")
    cl.set_replicas(4, 0.0)  # one loading pod
    loading = [p for p in cl.pods if p.ready is None][0]
    cl.set_replicas(3, 10.0)
    assert loading.gone == 10.0
    ready = sorted(cl.ready_pods(), key=lambda p: p.name)
    cl.pods[-1].ready = 5.0  # make the last one the most recently ready
    cl.set_replicas(2, 20.0)
    assert cl.pods[-1].deleted == 20.0 and ready[0].deleted is None


def test_draining_pod_finishes_its_requests_then_goes() -> None:
    cl = Cluster(P, 1, max_pods=4)
    cl.route(np.zeros(3), np.full(3, 50, dtype=np.int64), np.full(3, 20, dtype=np.int64))
    cl.set_replicas(0, 0.0)
    pod = cl.pods[0]
    assert pod.deleted == 0.0 and pod.gone is None
    _tick(cl, 0.0, 5.0, 0.1)
    assert pod.gone is not None and cl.failed.arrival.size == 0


def test_gpu_billing_static_fleet(tmp_path) -> None:  # type: ignore[no-untyped-def]
    trace = tmp_path / "t.csv"
    trace.write_text("arrival_s,input_tokens,output_tokens\n0.0,100,10\n599.0,100,10\n")
    sc = Scenario(name="b", trace=str(trace), duration=600.0, rate_scale=1.0)
    r = run_one(prepare(sc), "static-peak", 3.0)
    # 3 replicas (3 x the peak need of 1) for 600 s = 0.5 GPU-hours, no scaling; its 3 warm
    # nodes (1 GPU each) are billed for the same 600 s
    assert abs(r.gpu_hours - 0.5) < 1e-6 and r.scale_actions == 0 and r.slo_attainment == 1.0
    assert r.gpu_hours_pods == r.gpu_hours and r.gpu_hours_nodes is not None and abs(r.gpu_hours_nodes - 0.5) < 1e-9


def test_a_node_is_billed_from_its_request_to_its_removal_idle_time_included() -> None:
    """Asked for at 100 s, ready at 400 s (300 s provisioning); its pod goes at 1000 s, the node
    600 s later: billed 100 .. 1600 = 1,500 s. The warm node is billed from 0."""
    cl = Cluster(P, 1, max_pods=8, startup="fixed")
    cl.set_replicas(2, 100.0)
    _tick(cl, 100.0, 1000.0)
    pod = cl.pods[-1]
    assert (pod.scheduled, pod.ready) == (400.0, 490.0)
    cl.set_replicas(1, 1000.0)  # the newest ready pod goes
    _tick(cl, 1000.0, 2000.0)
    assert pod.gone == 1000.0
    (node,) = cl.removed_nodes
    assert (node.requested_at, node.ready_at, node.removed_at) == (100.0, 400.0, 1600.0)
    assert cl.node_gpu_seconds(0.0, 2000.0) == 2000.0 + 1500.0
    assert cl.node_gpu_seconds(0.0, 1000.0) == 1000.0 + 900.0  # clipped to the slice end
    assert cl.node_gpu_seconds(500.0, 2000.0) == 1500.0 + 1100.0  # ... and to its start


def test_node_billing_counts_every_gpu_of_a_node() -> None:
    p4 = replace(P, gpus_per_node=4)  # 4 GPUs per node, 1 per pod: one warm node holds 4 pods
    cl = Cluster(p4, 1, max_pods=8, startup="fixed")
    cl.set_replicas(5, 0.0)  # 3 fit on the warm node, the fifth asks for a node at 0 s
    _tick(cl, 0.0, 400.0)
    assert len(cl.nodes) == 2 and cl.nodes[1].requested_at == 0.0
    assert cl.node_gpu_seconds(0.0, 400.0) == 4 * 400.0 * 2


def test_new_pods_and_nodes_draw_start_up_times_deterministic_per_seed() -> None:
    def starts(seed: int) -> tuple[list[float], list[float]]:
        cl = Cluster(P, 1, max_pods=16, seed=seed)
        cl.set_replicas(6, 0.0)
        cl.advance(0.0)
        return [p.load_s for p in cl.pods], [n.ready_at - n.requested_at for n in cl.nodes[1:]]

    loads, provs = starts(0)
    assert loads[0] == P.model_load_s  # the warm pod of t = 0 draws nothing
    assert len(set(loads[1:])) == 5 and all(75.0 < x < 142.0 for x in loads[1:])
    assert len(provs) == 5 and len(set(provs)) == 5 and all(180.0 <= x <= 420.0 for x in provs)
    assert starts(0) == (loads, provs)
    other = starts(1)
    assert other[0][1:] != loads[1:] and other[1] != provs


def test_a_pod_is_ready_after_its_own_drawn_load_time() -> None:
    cl = Cluster(P, 1, max_pods=8, warm_nodes=2, seed=3)
    cl.set_replicas(2, 10.0)
    new = cl.pods[-1]
    assert new.scheduled == 10.0 and new.load_s != P.model_load_s
    ready_at = 10.0 + new.load_s
    _tick(cl, 10.0, ready_at - 1.0)
    assert new.ready is None
    _tick(cl, ready_at - 1.0, ready_at + 1.0)
    assert new.ready == ready_at


def test_water_fill_least_outstanding() -> None:
    # loads 5, 2, 3 and 4 new: 2->3, then 3,3 -> 4,4, then one goes to 5: [0, 3, 1]
    assert water_fill(np.array([5, 2, 3]), 4).tolist() == [0, 3, 1]
    assert water_fill(np.array([0, 0]), 5).sum() == 5
