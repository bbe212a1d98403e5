"""The shape of one tick at scale: the number of Prometheus queries and Kubernetes list calls
is the same for 20 and for 200 Deployments (constant, not per target). A correctness test,
not a timed one: the timings are `benchmarks/bench_scale.py`'s job (docs/scale.md)."""

from __future__ import annotations

import re
import time
from pathlib import Path

import pytest
import yaml

from autoscaler.config import ConfigWatcher
from autoscaler.adapters.kubernetes import PER_NAMESPACE_LIST_LIMIT, KubeClient
from autoscaler.controller.loop import Controller
from autoscaler.adapters.prometheus import QUERIES_PER_FETCH
from tests.kube_api_server import KubeApiServer, deployment, node, pod
from tests.security.stub_prometheus import StubPrometheus

LIST_PATH = re.compile(r"/(pods|nodes|deployments|horizontalpodautoscalers)$")


def _seed(server: KubeApiServer, deployments: int, namespaces: int) -> list[tuple[str, str]]:
    now = time.time()
    server.seed(*(node(f"gpu-node-{k}", gpus=8) for k in range(deployments // 4 + 1)))
    targets = []
    for i in range(deployments):
        ns, name = f"team-{i % namespaces}", f"model-{i:03d}"
        server.put(deployment(name, ns, replicas=2, labels={"app": name}))
        for j in range(2):
            server.put(pod(f"{name}-abc-{j}", ns, labels={"app": name}, node_name=f"gpu-node-{i // 4}",
                           created_at=now - 900))
        targets.append((ns, name))
    return targets


def _tick_counts(server: KubeApiServer, kubeconfig: Path, tmp_path: Path, deployments: int,
                 namespaces: int) -> tuple[int, int, int]:
    """(Prometheus queries, Kubernetes list calls, all Kubernetes requests) of a steady tick."""
    targets = _seed(server, deployments, namespaces)
    with StubPrometheus() as prometheus:
        config = tmp_path / f"autoscaler-{deployments}.yaml"
        config.write_text(yaml.safe_dump({
            "controller": {"prometheus": {"url": prometheus.url}, "namespace": "autoscaler"},
            "targets": [{"namespace": ns, "deployment": name} for ns, name in targets],
        }))
        kube = KubeClient.from_environment(kubeconfig=str(kubeconfig), sleep=lambda s: None)
        controller = Controller(watcher=ConfigWatcher(config), kube=kube, clock=time.time)
        try:
            controller.tick()  # the first tick also reads (and creates) the state ConfigMap
            server.clear_requests()
            prometheus.requests.clear()
            outcomes = controller.tick()
        finally:
            controller.close()
            kube.close()
        assert len(outcomes) == deployments and {o.action for o in outcomes} == {"hold"}
        queries = [p for p, _ in prometheus.requests if p.startswith("/api/v1/query")]
    lists = server.requests_matching(method="GET", path_regex=LIST_PATH.pattern)
    return len(queries), len(lists), len(server.requests)


@pytest.mark.parametrize("namespaces", [2, 5])
def test_queries_and_list_calls_do_not_grow_with_the_targets(tmp_path: Path, namespaces: int) -> None:
    counts = {}
    for deployments in (20, 200):
        with KubeApiServer() as server:
            kubeconfig = server.write_kubeconfig(tmp_path / f"kubeconfig-{deployments}")
            counts[deployments] = _tick_counts(server, kubeconfig, tmp_path, deployments, namespaces)
    assert counts[20] == counts[200], counts
    queries, lists, everything = counts[200]
    assert queries == QUERIES_PER_FETCH
    # nodes + pods cluster-wide; Deployments and HPAs per namespace up to the limit, else cluster-wide
    scopes = namespaces if namespaces <= PER_NAMESPACE_LIST_LIMIT else 1
    assert lists == 2 + 2 * scopes
    assert everything == lists  # a steady tick writes nothing (no scale change, state unchanged)
